# fp16 training with three distributed-optimizer instances (testdata/megatron/distopt/
# f_tp1pp1dp3_fp16_inst3: megatron-core 0.16.1, --fp16, DP 3, --num-distributed-optimizer-
# instances 3, three buckets). The grad scaler's state (scale 1024, growth_tracker 1,
# hysteresis_tracker 2) goes through every form: Megatron's legacy and dp_reshardable saves
# (its scaler a saved object with a tensor in it) read to Megatron's own legacy files, tensor
# for tensor; our dp_reshardable and fully_reshardable writes, and the plain optimizer's form
# and back, keep it. The buffers are laid out for DP 1 (each instance's part): the same files
# come back at DP 3; the dp_reshardable save read as one instance of DP 3 (args rewritten) does
# not fit its per-bucket sizes; a DP the instances do not divide, and one optimizer per model
# chunk (--overlap-param-gather-with-optimizer-step), are refused.
F="$TESTDATA/megatron/distopt/f_tp1pp1dp3_fp16_inst3"
R=iter_0000003
scaler() { # LABEL FILE: the grad scaler in a torch.save file (model_optim_rng.pt, common.pt)
    python3 - "$@" <<'PY'
import pickle, struct, sys, zipfile
z = zipfile.ZipFile(sys.argv[2])
pre = z.namelist()[0].split("/")[0] + "/"
class Stub:
    def __init__(self, *a, **k): pass
    def __setstate__(self, s): pass
def rebuild(pid, offset, size, *rest):
    if pid[1].__name__ != "FloatStorage":
        return "tensor"
    data = z.read(pre + "data/" + pid[2])
    return ("tensor", list(size), struct.unpack_from("<f", data, 4 * offset)[0])
class U(pickle.Unpickler):
    def find_class(self, mod, name):
        if name == "_rebuild_tensor_v2":
            return rebuild
        if name == "OrderedDict":
            return type(name, (dict,), {})
        if mod == "torch" and name.endswith("Storage"):
            return type(name, (), {})
        return Stub
    def persistent_load(self, pid):
        return pid
o = U(z.open(pre + "data.pkl")).load()["optimizer"]
print(sys.argv[1] + ":", o.get("grad_scaler"))
PY
}
same() { # legacy rank file $2 of output $1 equals Megatron's
    ckptconv diff "$F/legacy/$R/mp_rank_00/$2" "$1/$R/mp_rank_00/$2" --quiet && echo "$1 $2: Megatron's"
}
scaler "Megatron's legacy" "$F/legacy/$R/mp_rank_00/model_optim_rng.pt"
for form in legacy dp_reshardable; do
    ckptconv reshard -q "$F/$form" $form --tp 1 --pp 1
    same $form model_optim_rng.pt
    same $form distrib_optim.pt
    scaler "$form -> legacy" $form/$R/mp_rank_00/model_optim_rng.pt
done
ckptconv reshard -q "$F/legacy" dp --tp 1 --pp 1 --to torch_dist
ckptconv reshard -q dp dp_back --tp 1 --pp 1
same dp_back model_optim_rng.pt
same dp_back distrib_optim.pt
ckptconv reshard -q "$F/legacy" fully --tp 1 --pp 1 --to torch_dist --optim-format fully_reshardable
scaler "legacy -> fully_reshardable common.pt" fully/$R/common.pt
ckptconv reshard -q fully fully_back --tp 1 --pp 1
same fully_back distrib_optim.pt
ckptconv reshard -q "$F/dp_reshardable" tp2 --tp 2 --pp 1 --to torch_dist
ckptconv reshard -q tp2 tp2_back --tp 1 --pp 1
same tp2_back distrib_optim.pt
scaler "dp_reshardable -> ours at TP 2 -> legacy" tp2_back/$R/mp_rank_00/model_optim_rng.pt
ckptconv reshard -q "$F/dp_reshardable" plain --tp 2 --pp 1 --to-optimizer plain
scaler "dp_reshardable -> plain TP 2, rank 1" plain/$R/mp_rank_01/model_optim_rng.pt
ckptconv reshard -q plain plain_back --tp 1 --pp 1 --to-optimizer distributed
same plain_back distrib_optim.pt
scaler "plain -> distributed" plain_back/$R/mp_rank_00/model_optim_rng.pt
# two instances of DP 1 at DP 2, and one of DP 3 (buckets padded to 128, then 384), and back
ckptconv reshard -q "$F/legacy" inst2 --tp 1 --pp 1 --dp 2 --num-distributed-optimizer-instances 2
ckptconv reshard -q inst2 inst2_back --tp 1 --pp 1 --dp 3 --num-distributed-optimizer-instances 3
same inst2_back distrib_optim.pt
ckptconv reshard -q "$F/legacy" inst1 --tp 1 --pp 1 --num-distributed-optimizer-instances 1 --to torch_dist
ckptconv reshard -q inst1 inst1_back --tp 1 --pp 1 --num-distributed-optimizer-instances 3
same inst1_back distrib_optim.pt
# Megatron's dp_reshardable save, its args saying one instance: its buckets do not fit
cp -r "$F/dp_reshardable" one_instance
python3 "$CLI_DIR/poke_pickle.py" one_instance/$R/common.pt '(num_distributed_optimizer_instances(?:q.|r....)K)\x03' '\x01'
ckptconv reshard -q one_instance out --tp 1 --pp 1
echo "one instance: exit $?"
ckptconv reshard -q "$F/legacy" out --tp 1 --pp 1 --dp 2
echo "DP 2, three instances: exit $?"
cp -r "$F/legacy" overlap_step
python3 "$CLI_DIR/poke_pickle.py" overlap_step/$R/mp_rank_00/model_optim_rng.pt '(overlap_param_gather_with_optimizer_step(?:q.|r....))\x89' '\x88'
ckptconv reshard -q overlap_step out --tp 1 --pp 1
echo "overlap with the optimizer step: exit $?"
ckptconv reshard -q overlap_step out --tp 1 --pp 1 --no-optimizer && echo "model only: exit 0"
