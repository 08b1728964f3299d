# A Qwen3-MoE with a dense layer 0 (dense_layers.sh's model, said by mlp_only_layers [0]) as a
# torch_dist checkpoint: its moe_layer_freq is a list, so megatron-core 0.16.1 keys its layers one
# by one, "decoder.layers.<global layer>.<module key>" without a layer axis (transformer_block.py,
# non_homogeneous_layers), a MoE layer's experts one item [num_experts, ...], and the local
# spec's norms under Transformer Engine's names (its keys map: input_layernorm. ->
# self_attention.linear_qkv.layer_norm_, pre_mlp_layernorm. -> mlp.linear_fc1.layer_norm_, the
# MoE layers' too). hf2mcore at TP 2 PP 2 EP 2, local and Transformer Engine names, to torch_dist
# and back gives hf2mcore's files byte for byte; mcore2hf of the torch_dist gives the HF tensors.
set -e
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
tensor() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
same() { (cd "$1" && find . -type f | sort) | while read -r f; do cmp "$1/$f" "$2/$f"; done; }
rm -rf src && cp -r "$TESTDATA/hf/transformers5/qwen3_moe_tiny" src
edit src/config.json intermediate_size 32
edit src/config.json mlp_only_layers "[0]"
l=model.layers.0.mlp
for w in gate_proj up_proj down_proj; do
    tensor src/model.safetensors rename $l.experts.0.$w.weight $l.$w.weight
    for e in 1 2 3; do tensor src/model.safetensors remove $l.experts.$e.$w.weight; done
done
tensor src/model.safetensors remove $l.gate.weight
for impl in local transformer_engine; do
    ckptconv hf2mcore src mc --tp 2 --pp 2 --ep 2 --transformer-impl "$impl" -q
    ckptconv reshard mc td --to torch_dist -q
    ckptconv reshard td back --to torch -q && same mc back
    ckptconv mcore2hf td hf -q
    echo "== $impl TP 2 PP 2 EP 2 -> torch_dist -> legacy: hf2mcore's files; mcore2hf: $(ckptconv diff src hf | tail -1)"
    ckptconv inspect td/iter_0000001 | grep -E "^decoder.layers.[01].(mlp|self_attention.linear_qkv.layer_norm|pre_mlp)" | cut -c1-60,100-
    rm -rf mc td back hf
done
