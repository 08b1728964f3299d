# Mixtral (4 experts, top 2, on every layer) that transformers 4.53 and 5.24 wrote (the same
# per-expert names: 5.24 keeps its experts fused in memory but saves 4.x's names) comes back
# from Megatron as itself at TP 1/2 x PP 1/2, local and Transformer Engine names: the same
# model.safetensors and a config.json of the family. A rank holds its layers' router and
# pre_mlp_layernorm whole and every expert (EP 1) with its TP part of [gate; up] and down, each
# expert linear with its own _extra_state; the args say the routing.
set -e
show() { python3 "$CLI_DIR/../hf/show_config.py" "$@"; }
args() { python3 "$CLI_DIR/show_args.py" "$@"; }
for m in mixtral_tiny transformers5/mixtral_tiny; do
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
done
src="$TESTDATA/hf/mixtral_tiny"
# and from any expert layout: EP 2 under TP 2 PP 2, EP 4, and the local spec's grouped GEMM
ckptconv hf2mcore "$src" ep --tp 2 --pp 2 --ep 2 --transformer-impl local -q
ls ep/iter_0000001
ckptconv mcore2hf ep hf -q
cmp "$src/model.safetensors" hf/model.safetensors
rm -rf hf
ckptconv reshard ep ep4 --tp 1 --pp 1 --ep 4 -q
ckptconv reshard ep4 gg --tp 1 --pp 1 --ep 2 --moe-grouped-gemm on -q
ckptconv inspect gg/iter_0000001/mp_rank_00_001/model_optim_rng.pt | grep -E "layers.1.mlp"
ckptconv mcore2hf gg hf -q
cmp "$src/model.safetensors" hf/model.safetensors
rm -rf ep ep4 gg hf
# through torch_dist: the args say the expert TP (= TP), as Megatron-LM's do
ckptconv hf2mcore "$src" tp2 --tp 2 --transformer-impl local -q
python3 "$CLI_DIR/show_args.py" tp2/iter_0000001/mp_rank_00/model_optim_rng.pt expert_tensor_parallel_size
ckptconv reshard tp2 dist --tp 2 --pp 1 --to torch_dist -q
ckptconv mcore2hf dist hf -q
cmp "$src/model.safetensors" hf/model.safetensors
rm -rf tp2 dist hf
for impl in local transformer_engine; do
    ckptconv hf2mcore "$src" mc --tp 2 --pp 2 --transformer-impl "$impl" -q
    echo "== $impl"
    ckptconv inspect mc/iter_0000001/mp_rank_01_001/model_optim_rng.pt | grep -E "layers.0.(mlp|pre_mlp)" | grep -vE "local_experts.[12]"
    rm -rf mc
done
ckptconv hf2mcore "$src" mc -q
args mc/iter_0000001/mp_rank_00/model_optim_rng.pt hf_model_type num_experts moe_router_topk ffn_hidden_size \
    moe_ffn_hidden_size moe_layer_freq moe_router_score_function moe_router_pre_softmax moe_router_load_balancing_type \
    moe_aux_loss_coeff moe_grouped_gemm moe_token_dispatcher_type
ckptconv mcore2hf mc hf -q
echo "== config.json"
show hf/config.json
