# Qwen3 (q/k RMSNorm per head, head_dim 16 != hidden 32 / 4 heads) that transformers 5 wrote
# comes back from Megatron (TP 2 PP 2, local and Transformer Engine names) as itself: the same
# model.safetensors, a config.json of the family, each rank with its layers' q/k layernorms
# whole (replicated); verify finds each side equal to the source, the Megatron one run as its
# tensor-parallel ranks.
set -e
show() { python3 "$CLI_DIR/../hf/show_config.py" "$@"; }
src="$TESTDATA/hf/transformers5/qwen3_tiny"
for impl in local transformer_engine; do
    ckptconv hf2mcore "$src" mc --tp 2 --pp 2 --transformer-impl "$impl" -q
    ckptconv mcore2hf mc hf -q
    cmp "$src/model.safetensors" hf/model.safetensors
    echo "== $impl"
    ckptconv inspect mc/iter_0000001/mp_rank_01_001/model_optim_rng.pt | grep -E "_layernorm.weight"
    show hf/config.json
    ckptconv verify "$src" mc -q
    ckptconv verify "$src" hf -q
    rm -rf mc hf
done
