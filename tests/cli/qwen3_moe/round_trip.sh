# Qwen3-MoE (4 experts, top 2, norm_topk_prob false, q/k norms, head_dim 16) that transformers
# 4.53 (num_experts) and 5.24 (num_local_experts) wrote comes back from Megatron as itself at
# TP 1/2 x PP 1/2, local and Transformer Engine names: the same model.safetensors, a
# config.json with both keys. norm_topk_prob false is Megatron's moe_router_pre_softmax True
# (softmax over every expert, then the top-k), true its default (top-k, then softmax), and back.
set -e
show() { python3 "$CLI_DIR/../hf/show_config.py" "$@"; }
args() { python3 "$CLI_DIR/../mixtral/show_args.py" "$@"; }
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
for m in qwen3_moe_tiny transformers5/qwen3_moe_tiny; do
    src="$TESTDATA/hf/$m"
    for impl in local transformer_engine; do
        for layout in "1 1" "2 1" "1 2" "2 2"; do
            set -- $layout
            ckptconv hf2mcore "$src" mc --tp "$1" --pp "$2" --transformer-impl "$impl" -q
            ckptconv mcore2hf mc hf -q
            cmp "$src/model.safetensors" hf/model.safetensors
            rm -rf mc hf
        done
    done
    echo "== $m"
    ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
    ckptconv inspect mc/iter_0000001/mp_rank_01_001/model_optim_rng.pt | grep -E "layers.0.(mlp.router|pre_mlp|self_attention.[qk]_layernorm)"
    args mc/iter_0000001/mp_rank_00_000/model_optim_rng.pt hf_model_type qk_layernorm num_experts moe_router_topk \
        ffn_hidden_size moe_ffn_hidden_size moe_router_pre_softmax
    ckptconv mcore2hf mc hf -q
    show hf/config.json
    rm -rf mc hf
done
cp -r "$TESTDATA/hf/transformers5/qwen3_moe_tiny" in
edit in/config.json norm_topk_prob true
ckptconv hf2mcore in mc -q
echo "== norm_topk_prob true"
args mc/iter_0000001/mp_rank_00/model_optim_rng.pt moe_router_pre_softmax
ckptconv mcore2hf mc hf -q
show hf/config.json | grep norm_topk_prob
