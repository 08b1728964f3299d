# verify runs a Qwen3-MoE with dense layers anywhere (mlp_only_layers, decoder_sparse_step;
# Megatron's moe_layer_freq list), each an intermediate_size SwiGLU MLP: derived from the fixture
# by making layer 1 dense (its expert 0 as the dense MLP, intermediate_size 32), so the dense
# layer comes after a MoE layer (mlp_only_layers [1]). The Hugging Face files against hf2mcore's
# output (TP 1, and TP 2 EP 2 local; the ranks against their merge) pass, layer 0 with its
# router and experts, layer 1 alone; a config.json that says layer 0 is the dense one instead
# fails, exit 1, naming layer 0's expert tensor that its config says is not there; the fixture
# itself against the copy fails at layer 1, noting that layer 1 is a MoE layer in one only.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
tensor() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
rm -rf src && cp -r "$TESTDATA/hf/qwen3_moe_tiny" src && chmod -R u+w src
edit src/config.json intermediate_size 32
l=model.layers.1.mlp
for w in gate_proj up_proj down_proj; do
    tensor src/model.safetensors rename $l.experts.0.$w.weight $l.$w.weight
    for e in 1 2 3; do tensor src/model.safetensors remove $l.experts.$e.$w.weight; done
done
tensor src/model.safetensors remove $l.gate.weight
rm -rf in && cp -r src in
edit in/config.json mlp_only_layers "[1]"
ckptconv hf2mcore in mc -q || exit 1
ckptconv verify in mc --device cpu --tokens 16 -q
echo "TP 1: exit $?"
ckptconv hf2mcore in mc2 --tp 2 --ep 2 --transformer-impl local -q || exit 1
ckptconv verify in mc2 --device cpu --tokens 16 -q
echo "TP 2 EP 2: exit $?"
ckptconv verify mc2 --device cpu --tokens 16 -q
echo "TP 2 EP 2 ranks against their merge: exit $?"
ckptconv verify in mc --device cpu --tokens 16 --json | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["pass"], [l["name"] for l in o["layers"] if l.get("index") in (0, 1)])
print([n for n in o["notes"] if "differ" in n])'
rm -rf swapped && cp -r in swapped
edit swapped/config.json mlp_only_layers "[0]"
ckptconv verify swapped mc --device cpu --tokens 16 -q
echo "config says layer 0 dense: exit $?"
# against the fixture itself (layer 1 a MoE layer there): layer 1 fails, and the notes say why
ckptconv verify "$TESTDATA/hf/qwen3_moe_tiny" in --device cpu --tokens 16 > out.txt
echo "fixture against its dense-layer copy: exit $?"
grep -E "^note: the configs differ|^layer 1  |^FAIL" out.txt | sed -E 's/ +[-+0-9.e]+ +[-+0-9.e]+ +[-+0-9.]+  FAIL$/: FAIL/'
