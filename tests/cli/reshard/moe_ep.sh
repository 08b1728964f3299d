# A mixture of experts (megatron-core 0.16.1: 4 experts at EP 2 inside DP 2, the distributed
# optimizer's chained [dense, expert] state) at another EP: EP 2 -> 1 -> 2, 2 -> 4 -> 2 and
# 2 -> 1 -> 4 give the files of the direct reshard back byte for byte (and the source's
# content), the optimizer state with them;
# each file holds its experts at their local index, in the source's key order. At EP 1 the
# experts are dense parameters (one optimizer, no _EEE suffix). torch_dist model items do not
# depend on the EP. --moe-grouped-gemm on writes the local spec's GroupedMLP (model only).
# What cannot be written is refused before anything is, as is a checkpoint whose EP rank
# files do not fit together.
set -e
D="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy"
R=iter_0000003
keys() { ckptconv inspect "$1" | awk '/^model\//{print $1}'; }
same() { # same bytes as a same-layout reshard, same content as the source
    for f in same/$R/mp_rank_*/*.pt; do
        rel=${f#same/}
        cmp -s "$f" "$1/$rel" || { echo "$1: $rel differs"; return 1; }
        ckptconv diff -q "$D/$rel" "$1/$rel" || { echo "$1: $rel differs from the source"; return 1; }
    done
    echo "$1: $(ls same/$R | wc -l) ranks identical"
}
ckptconv reshard -q "$D" same --tp 1 --pp 1
for r in mp_rank_00_000 mp_rank_00_001; do
    keys "$D/$R/$r/model_optim_rng.pt" >want
    keys same/$R/$r/model_optim_rng.pt | cmp -s want - && echo "$r: the source's key order"
done
ckptconv reshard -q "$D" ep1 --tp 1 --pp 1 --ep 1
ls ep1/$R
keys ep1/$R/mp_rank_00/model_optim_rng.pt | grep 'layers\.1\.mlp\.experts'
ckptconv reshard -q ep1 back1 --tp 1 --pp 1 --ep 2
same back1
ckptconv reshard -q ep1 ep1_4 --tp 1 --pp 1 --ep 4 --dp 4
# the same from megatron-core's torch_dist (dp_reshardable) save of the same state
ckptconv reshard -q "${D%/legacy}/dp_reshardable" td_ep1 --tp 1 --pp 1 --ep 1
for f in ep1/$R/mp_rank_00/*.pt; do ckptconv diff -q "$f" "td_ep1/${f#ep1/}" || exit 1; done &&
    echo "torch_dist -> EP 1: the same state"
ckptconv reshard -q "$D" ep1_model --tp 1 --pp 1 --ep 1 --no-optimizer
ckptconv reshard -q ep1_model back1_model --tp 1 --pp 1 --ep 2 --no-optimizer
ckptconv reshard -q "$D" same_model --tp 1 --pp 1 --no-optimizer
for f in same_model/$R/mp_rank_*/*.pt; do cmp "$f" "back1_model/${f#same_model/}"; done && echo "EP 2 -> 1 -> 2 (model): same bytes"
ckptconv reshard "$D" ep4 --tp 1 --pp 1 --ep 4 --dp 4 2>&1 | sed 's/KiB.* in [0-9.]* s$/KiB/'
for f in ep4/$R/mp_rank_*/*.pt; do cmp "$f" "ep1_4/${f#ep4/}"; done && echo "EP 2 -> 1 -> 4: EP 2 -> 4's bytes"
keys ep4/$R/mp_rank_00_003/model_optim_rng.pt | grep 'layers\.0\.mlp\.experts'
ckptconv reshard -q ep4 back4 --tp 1 --pp 1 --ep 2 --dp 2
same back4
ckptconv reshard -q "$D" tp2ep1 --tp 2 --pp 2 --ep 1
ckptconv reshard -q tp2ep1 back2 --tp 1 --pp 1 --ep 2 --no-optimizer
for f in same_model/$R/mp_rank_*/*.pt; do cmp "$f" "back2/${f#same_model/}"; done && echo "EP 2 -> TP 2 PP 2 EP 1 -> 2 (model): same bytes"
# torch_dist: the model's items are the same at any EP (each expert one chunk at its global
# index); args say the EP, and a legacy target of it gets that EP
ckptconv reshard -q "$D" td2 --tp 1 --pp 1 --to torch_dist --no-optimizer
ckptconv reshard -q "$D" td1 --tp 1 --pp 1 --ep 1 --to torch_dist --no-optimizer
for f in .metadata __0_0.distcp __0_1.distcp; do cmp td2/$R/$f td1/$R/$f; done && echo "torch_dist EP 1: EP 2's items"
ckptconv reshard -q td1 td1_legacy --tp 1 --pp 1 --no-optimizer
ls td1_legacy/$R
ckptconv diff -q ep1_model/$R/mp_rank_00/model_optim_rng.pt td1_legacy/$R/mp_rank_00/model_optim_rng.pt && echo "its legacy: EP 1's"
# the local spec's GroupedMLP (its values: tests/unit/test_megatron_experts.c; megatron-core's
# own save of it: tests/interop/distopt_check.py with the oracle's grouped_gemm pair)
ckptconv reshard -q "$D" grouped --tp 1 --pp 1 --ep 1 --moe-grouped-gemm on --no-optimizer
keys grouped/$R/mp_rank_00/model_optim_rng.pt | grep 'layers\.0\.mlp'
# read back, each expert a view of them: SequentialMLP at EP 2 again, byte for byte
ckptconv reshard -q grouped sequential --tp 1 --pp 1 --ep 2 --moe-grouped-gemm off
for f in same_model/$R/mp_rank_*/*.pt; do cmp "$f" "sequential/${f#same_model/}"; done && echo "GroupedMLP -> SequentialMLP: same bytes"
ckptconv reshard -q grouped grouped2 --tp 2 --pp 2 --ep 4 --dp 4
ckptconv reshard -q grouped2 sequential2 --tp 1 --pp 1 --ep 2 --dp 2 --moe-grouped-gemm off
for f in same_model/$R/mp_rank_*/*.pt; do cmp "$f" "sequential2/${f#same_model/}"; done && echo "GroupedMLP TP 2 PP 2 EP 4 -> SequentialMLP: same bytes"
# expert TP 1 at TP 2: the files of expert data-parallel rank 0, whole experts in each (read
# back: moe_etp.sh)
ckptconv reshard -q "$D" etp1 --tp 2 --pp 1 --ep 2 --etp 1
ls etp1/$R
ckptconv inspect etp1/$R/mp_rank_01_001/model_optim_rng.pt | grep 'layers\.0\.mlp\.experts.*fc1\|linear_qkv.weight'
set +e
cp -r "$D" src
for opts in "--ep 3" "--ep 4" "--etp 2" "--ep 1 --to torch_dist" "--ep 0" "--moe-grouped-gemm on" \
    "--moe-grouped-gemm yes"; do
    # shellcheck disable=SC2086
    ckptconv reshard src x --tp 1 --pp 1 $opts
    echo "$opts: exit $?"
done
rewrite() { # a model_optim_rng.pt's pickle with key "decoder.OLD" renamed "decoder.NEW"
    python3 - "$@" <<'PY'
import sys, zipfile
path = sys.argv[1]
old, new = (("decoder." + a).encode() for a in sys.argv[2:4])
old, new = (b"X" + len(k).to_bytes(4, "little") + k for k in (old, new))  # BINUNICODE
z = zipfile.ZipFile(path)
items = [(i, z.read(i.filename)) for i in z.infolist()]
z.close()
items = [(i, d.replace(old, new) if i.filename.endswith("data.pkl") and d.count(old) == 1 else d) for i, d in items]
with zipfile.ZipFile(path, "w") as out:
    for i, d in items:
        out.writestr(i, d)
PY
}
cp -r "$D" local2
rewrite local2/$R/mp_rank_00_001/model_optim_rng.pt layers.0.mlp.experts.local_experts.1.linear_fc2.weight \
    layers.0.mlp.experts.local_experts.2.linear_fc2.weight
cp -r "$D" dense
rewrite dense/$R/mp_rank_00_001/model_optim_rng.pt layers.1.pre_mlp_layernorm.weight layers.1.pre_mlp_layernorm.wxight
cp -r "$D" missing
rewrite missing/$R/mp_rank_00_001/model_optim_rng.pt layers.1.mlp.experts.local_experts.1.linear_fc1.weight \
    layers.1.mlp.experts.local_experts.0.linear_fc1.bias
cp -r "$D" noexperts
rm -r noexperts/$R/mp_rank_00_001
cp -r "$D" huge
for f in huge/$R/*/model_optim_rng.pt; do
    python3 "$CLI_DIR/poke_pickle.py" "$f" '(num_experts(?:q.|r....))K\x04' 'J\x00\x00\x00\x40'
done
for set in local2 dense missing noexperts huge; do
    ckptconv reshard "$set" out --tp 1 --pp 1 --no-optimizer
    echo "$set: exit $?"
done
test ! -e x && test ! -e out && echo "nothing written"
