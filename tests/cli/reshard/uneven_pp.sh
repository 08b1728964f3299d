# megatron-core's uneven pipeline split (decoder_first/last_pipeline_num_layers,
# account_for_embedding/loss_in_pipeline_split; megatron-core 0.16.1 loads these files:
# testdata/gen/check_mcore_uneven_pp.py): the 4 layers of testdata/megatron/tp1 at PP 2 with a
# first stage of 1 layer, at PP 3 with the embedding and loss counted as layers (1, 2, 1), and
# back at even stages, byte for byte the direct reshard; args say the split as Megatron's
# argparse stores it; each stage file numbers its layers from 0. An HF model of 3 layers goes to
# PP 2 (hf2mcore) and back to HF unchanged. What megatron-core would refuse is refused, and a
# stage file holding other than the layers args give it is an error naming it.
set -e
S="$TESTDATA/megatron/tp1"
R=iter_0000010
layers() { ckptconv inspect "$1" | awk '/self_attention.linear_qkv.weight/{print $1}' | tr '\n' ' '; echo; }
same() { # every file of $1 is $2's, byte for byte
    for f in $(cd "$1" && find . -type f | sort); do cmp -s "$1/$f" "$2/$f" || { echo "$2: $f differs"; return 1; }; done
    echo "$2: the bytes of $1"
}
split_args() {
    python3 - "$1" <<'PY'
import re, sys, zipfile
data = next(zipfile.ZipFile(sys.argv[1]).read(n) for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.endswith("data.pkl"))
for name in (b"pipeline_model_parallel_size", b"decoder_first_pipeline_num_layers", b"decoder_last_pipeline_num_layers",
             b"account_for_embedding_in_pipeline_split", b"account_for_loss_in_pipeline_split"):
    m = re.search(re.escape(name) + rb"(?:q.|r....)?(K.|N|\x88|\x89)", data, re.S)
    v = m.group(1)
    print(name.decode(), {b"N": "None", b"\x88": "True", b"\x89": "False"}.get(v, v[1:2] and str(v[1])))
PY
}
ckptconv reshard -q "$S" first1 --pp 2 --decoder-first-pipeline-num-layers 1
split_args first1/$R/mp_rank_00_001/model_optim_rng.pt
for p in 000 001; do echo "stage $p: $(layers first1/$R/mp_rank_00_$p/model_optim_rng.pt)"; done
ckptconv inspect first1 | awk '/decoder.layers.*linear_qkv.weight/{print $1, $NF}'
ckptconv reshard -q first1 pp3 --pp 3 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
split_args pp3/$R/mp_rank_00_000/model_optim_rng.pt | tail -2
for p in 000 001 002; do echo "stage $p: $(layers pp3/$R/mp_rank_00_$p/model_optim_rng.pt)"; done
# back to even stages: the direct reshard's bytes
ckptconv reshard -q "$S" direct1 --pp 1
ckptconv reshard -q pp3 even1 --pp 1
same direct1 even1
ckptconv reshard -q "$S" direct2 --pp 2 --tp 2
ckptconv reshard -q pp3 even2 --pp 2 --tp 2
same direct2 even2
# without flags at the source's PP its split is kept, TP changed
ckptconv reshard -q first1 first1_tp2 --tp 2
ckptconv reshard -q "$S" first1_direct --tp 2 --pp 2 --decoder-first-pipeline-num-layers 1
same first1_direct first1_tp2
# last stage of 3 layers (one on the first), then back
ckptconv reshard -q "$S" last3 --pp 2 --decoder-last-pipeline-num-layers 3
for p in 000 001; do echo "last3 stage $p: $(layers last3/$R/mp_rank_00_$p/model_optim_rng.pt)"; done
ckptconv reshard -q last3 last3_even --pp 1
same direct1 last3_even
# HF: 3 layers over PP 2, and back
mkdir hf3
for f in "$TESTDATA/hf/llama_tiny"/*; do ln -s "$f" hf3/; done
rm hf3/config.json
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['num_hidden_layers']=3; json.dump(c, open('hf3/config.json','w'))" \
    "$TESTDATA/hf/llama_tiny/config.json"
ckptconv hf2mcore -q hf3 m3 --pp 2 --decoder-first-pipeline-num-layers 1 --drop 'model.layers.3.*'
for p in 000 001; do echo "hf2mcore stage $p: $(layers m3/iter_0000001/mp_rank_00_$p/model_optim_rng.pt)"; done
ckptconv hf2mcore -q hf3 m3e --pp 2 --account-for-embedding-in-pipeline-split --drop 'model.layers.3.*'
ckptconv hf2mcore -q hf3 m1 --drop 'model.layers.3.*'
ckptconv reshard -q m3 m3_even --pp 1
ckptconv reshard -q m3e m3e_even --pp 1
same m3_even m3e_even
ckptconv diff -q m1/iter_0000001/mp_rank_00/model_optim_rng.pt m3_even/iter_0000001/mp_rank_00/model_optim_rng.pt &&
    echo "PP 2 -> 1: the model of hf2mcore at PP 1"
ckptconv mcore2hf -q m3 back
ckptconv mcore2hf -q m1 back1
cmp back/model.safetensors back1/model.safetensors && echo "mcore2hf of PP 2 (1 + 2 layers): PP 1's safetensors"
python3 - hf3 back <<'PY'
import json, os, struct, sys
def tensors(d):  # name -> (dtype, shape, bytes) of every safetensors file in d
    out = {}
    for n in sorted(os.listdir(d)):
        if n.endswith(".safetensors"):
            b = open(os.path.join(d, n), "rb").read()
            k = struct.unpack("<Q", b[:8])[0]
            for name, t in json.loads(b[8:8 + k]).items():
                if name != "__metadata__":
                    out[name] = (t["dtype"], t["shape"], b[8 + k + t["data_offsets"][0]:8 + k + t["data_offsets"][1]])
    return out
src, back = tensors(sys.argv[1]), tensors(sys.argv[2])
src = {k: v for k, v in src.items() if not k.startswith("model.layers.3.")}
print("mcore2hf: the HF source's %d tensors" % len(src) if src == back else "mcore2hf: differs from the source")
PY
set +e
cp -r "$S" src
# refused: what megatron-core refuses, and a set that does not hold what its args say
for opts in "--pp 3" "--pp 2 --decoder-first-pipeline-num-layers 4" "--pp 3 --decoder-first-pipeline-num-layers 1" \
    "--pp 2 --decoder-first-pipeline-num-layers 1 --account-for-loss-in-pipeline-split" \
    "--pp 2 --account-for-embedding-in-pipeline-split" "--pp 2 --vpp 2 --decoder-first-pipeline-num-layers 2" \
    "--pp 2 --decoder-last-pipeline-num-layers 0"; do
    # shellcheck disable=SC2086
    ckptconv reshard src x $opts
    echo "$opts: exit $?"
done
ckptconv hf2mcore hf3 x --pp 2 --drop 'model.layers.3.*'
echo "hf2mcore --pp 2: exit $?"
# args saying a first stage of 2 layers where it holds 1 (its file lacks a layer), and the even
# PP 2 set with args saying a first stage of 1 layer (stage 0 holds one more)
cp -r first1 short
for f in short/$R/*/model_optim_rng.pt; do
    python3 "$CLI_DIR/poke_pickle.py" "$f" '(decoder_first_pipeline_num_layers(?:q.|r....))K\x01' 'K\x02'
done
ckptconv reshard short x --pp 1
echo "stage lacking a layer: exit $?"
ckptconv reshard -q "$S" bad --pp 2
for f in bad/$R/*/model_optim_rng.pt; do
    python3 "$CLI_DIR/poke_pickle.py" "$f" '(decoder_first_pipeline_num_layers(?:q.|r....))N' 'K\x01'
done
ckptconv reshard bad x --pp 1
echo "stage with a layer more: exit $?"
cp -r first1 layout
for f in layout/$R/*/model_optim_rng.pt; do
    python3 "$CLI_DIR/poke_pickle.py" "$f" '(pipeline_model_parallel_layout(?:q.|r....))N' 'X\x03\x00\x00\x00t|t'
done
ckptconv reshard layout x --pp 1
echo "layout string: exit $?"
test ! -e x && echo "nothing written"
