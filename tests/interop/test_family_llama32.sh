#!/usr/bin/env bash
# Llama 3.2 (tied embeddings, llama3 RoPE scaling factor 32) that transformers 4 and 5 wrote
# (testdata/hf/llama32_tiny, testdata/hf/transformers5/llama32_tiny;
# testdata/gen/README_hf_families.md):
#  - the numpy forward pass of hf_llama_check.py (llama3 inv_freq scaling, tied head) gives
#    transformers' own logits on each fixture;
#  - HF -> Megatron (TP2 PP2 local names, TP2 PP2 TE names) -> HF gives back model.safetensors
#    byte for byte, a config.json that says Llama 3.2 (tied, factor 32) as transformers 4 and
#    5 read it, and transformers' logits.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "numpy, safetensors"

OUT="$WORK/out"
mkdir -p "$OUT"
hf_py() { "$VENV_PYTHON" "$INTEROP_DIR/hf_llama_check.py" "$@"; }

LLAMA32='{"factor":32.0,"high_freq_factor":4.0,"low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_type":"llama3"}'

# round_trip SRC NAME IMPL: HF -> Megatron TP 2 PP 2 -> HF, the same model.safetensors
round_trip() {
    ckpt hf2mcore "$1" "$OUT/$2-mc" --transformer-impl "$3" --tp 2 --pp 2 -q
    ckpt mcore2hf "$OUT/$2-mc" "$OUT/$2-hf" -q
    cmp "$1/model.safetensors" "$OUT/$2-hf/model.safetensors"
}

for set in hf hf/transformers5; do
    src="$TESTDATA/$set/llama32_tiny"
    name="$(echo "$set" | tr / _)"
    queue hf "$set llama32: the forward pass gives transformers' logits" logits "$src" "$src/logits.json"
    for impl in local transformer_engine; do
        case_run "$set llama32 -> mcore TP2 PP2 ($impl) -> HF: the same tensors" round_trip "$src" "$name-$impl" "$impl"
        queue hf "$set llama32 round trip ($impl): config.json says Llama 3.2" config "$OUT/$name-$impl-hf" \
            'model_type="llama"' 'architectures=["LlamaForCausalLM"]' 'tie_word_embeddings=true' \
            'rope_theta=500000.0' "rope_scaling=$LLAMA32"
        queue hf "$set llama32 round trip ($impl): transformers' logits" logits "$OUT/$name-$impl-hf" "$src/logits.json"
    done
done
run_batch hf
finish
