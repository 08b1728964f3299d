# A Qwen3-MoE with dense layers (an intermediate_size SwiGLU MLP where mlp_only_layers names the
# layer or (layer + 1) % decoder_sparse_step != 0) converts through Megatron's moe_layer_freq list
# and back, tensor for tensor: derived from the fixture by making layer 0 dense (its expert 0 as
# the dense MLP, intermediate_size 32), said by mlp_only_layers [0] and by decoder_sparse_step 2.
# A dense layer's pre-MLP norm is linear_fc1.layer_norm_weight under Transformer Engine and
# pre_mlp_layernorm under the local spec; a layer whose tensors are not of its kind is refused.
set -e
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
tensor() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
args() { python3 "$CLI_DIR/../mixtral/show_args.py" "$@"; }
rm -rf src && cp -r "$TESTDATA/hf/transformers5/qwen3_moe_tiny" src
edit src/config.json intermediate_size 32
l=model.layers.0.mlp
for w in gate_proj up_proj down_proj; do
    tensor src/model.safetensors rename $l.experts.0.$w.weight $l.$w.weight
    for e in 1 2 3; do tensor src/model.safetensors remove $l.experts.$e.$w.weight; done
done
tensor src/model.safetensors remove $l.gate.weight
for say in "mlp_only_layers [0]" "decoder_sparse_step 2"; do
    rm -rf in && cp -r src in
    # shellcheck disable=SC2086
    edit in/config.json $say
    echo "== $say"
    for impl in local transformer_engine; do
        ckptconv hf2mcore in mc --tp 2 --pp 2 --ep 2 --transformer-impl "$impl" -q
        ckptconv inspect mc/iter_0000001/mp_rank_00_000_000/model_optim_rng.pt | grep -E "layers.0.(mlp|pre_mlp)"
        ckptconv mcore2hf mc hf -q
        ckptconv diff in hf | tail -1
        rm -rf mc hf
    done
done
ckptconv hf2mcore in mc -q
args mc/iter_0000001/mp_rank_00/model_optim_rng.pt moe_layer_freq ffn_hidden_size moe_ffn_hidden_size
ckptconv mcore2hf mc hf -q
python3 "$CLI_DIR/../hf/show_config.py" hf/config.json | grep -E "decoder_sparse_step|intermediate_size"
grep -A2 mlp_only_layers hf/config.json
set +e
rm -rf in && cp -r src in
ckptconv hf2mcore in out -q
echo "layer 0 dense, mlp_only_layers [] and decoder_sparse_step 1: exit $?"
edit in/config.json mlp_only_layers "[0, 1]"
ckptconv hf2mcore in out -q
echo "mlp_only_layers [0, 1]: exit $?"
edit in/config.json mlp_only_layers "[2]"
ckptconv hf2mcore in out -q
echo "mlp_only_layers [2]: exit $?"
