#!/usr/bin/env bash
# Qwen3 that transformers 5 wrote (testdata/hf/transformers5/qwen3_tiny: q/k RMSNorm per head,
# head_dim 16 != hidden 32 / 4 heads; testdata/gen/README_hf_families.md):
#  - the numpy forward pass of hf_llama_check.py (q_norm/k_norm before RoPE) gives
#    transformers' own logits, and with layer 1's q and k norms swapped it does not (so the
#    norms are run, not skipped);
#  - HF -> Megatron (TP2 PP2 local names, TP2 PP2 TE names) -> HF gives back model.safetensors
#    byte for byte, a config.json that says Qwen3, and transformers' logits.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "numpy, safetensors"

OUT="$WORK/out"
mkdir -p "$OUT"
hf_py() { "$VENV_PYTHON" "$INTEROP_DIR/hf_llama_check.py" "$@"; }
src="$TESTDATA/hf/transformers5/qwen3_tiny"

# round_trip NAME IMPL: HF -> Megatron TP 2 PP 2 -> HF, the same model.safetensors
round_trip() {
    ckpt hf2mcore "$src" "$OUT/$1-mc" --transformer-impl "$2" --tp 2 --pp 2 -q
    ckpt mcore2hf "$OUT/$1-mc" "$OUT/$1-hf" -q
    cmp "$src/model.safetensors" "$OUT/$1-hf/model.safetensors"
}

# swapped: a copy of the fixture with layer 1's q_norm and k_norm exchanged, whose logits must
# differ from transformers'
swapped() {
    cp -r "$src" "$OUT/swapped"
    "$VENV_PYTHON" "$REPO_DIR/tests/cli/hf/edit_tensor.py" "$OUT/swapped/model.safetensors" swap \
        model.layers.1.self_attn.q_norm.weight model.layers.1.self_attn.k_norm.weight
    ! hf_py logits "$OUT/swapped" "$src/logits.json"
}

queue hf "qwen3: the forward pass gives transformers' logits" logits "$src" "$src/logits.json"
case_run "qwen3 with layer 1's q/k norms swapped: the forward pass gives other logits" swapped
for impl in local transformer_engine; do
    case_run "qwen3 -> mcore TP2 PP2 ($impl) -> HF: the same tensors" round_trip "$impl" "$impl"
    queue hf "qwen3 round trip ($impl): config.json says Qwen3" config "$OUT/$impl-hf" \
        'model_type="qwen3"' 'architectures=["Qwen3ForCausalLM"]' 'head_dim=16' 'tie_word_embeddings=false' \
        'use_sliding_window=false' 'sliding_window=null'
    queue hf "qwen3 round trip ($impl): transformers' logits" logits "$OUT/$impl-hf" "$src/logits.json"
done
run_batch hf
finish
