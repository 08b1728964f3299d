#!/usr/bin/env bash
# hf2mcore and mcore2hf on Qwen2, Mistral and Llama 3.x models that transformers 4 and 5 wrote
# (testdata/hf/{qwen2,mistral,llama3}_tiny, testdata/hf/transformers5/*;
# testdata/gen/README_hf_families.md):
#  - the forward pass written here (biases, sliding window, llama3 RoPE scaling) gives
#    transformers' own logits on each fixture, so that it can judge what mcore2hf writes;
#  - HF -> Megatron (TP2 PP2 local names, TP2 TE names) -> HF gives back model.safetensors
#    byte for byte, a config.json of the same family (class, model_type, biases, window,
#    RoPE scaling as both transformers 4 and 5 read it), and transformers' logits.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "numpy, safetensors"

OUT="$WORK/out"
mkdir -p "$OUT"
hf_py() { "$VENV_PYTHON" "$INTEROP_DIR/hf_llama_check.py" "$@"; }

LLAMA3='{"factor":8.0,"high_freq_factor":4.0,"low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_type":"llama3"}'

# expect FAMILY: the config.json fields that say the family
expect() {
    case "$1" in
        qwen2) echo 'model_type="qwen2"' 'architectures=["Qwen2ForCausalLM"]' 'use_sliding_window=false' \
                    'sliding_window=null' 'rope_theta=1000000.0' 'tie_word_embeddings=true' ;;
        mistral) echo 'model_type="mistral"' 'architectures=["MistralForCausalLM"]' 'sliding_window=4' \
                      'tie_word_embeddings=false' ;;
        llama3) echo 'model_type="llama"' 'architectures=["LlamaForCausalLM"]' 'rope_theta=500000.0' \
                     "rope_scaling=$LLAMA3" ;;
    esac
}

# round_trip SRC NAME IMPL FLAGS...
round_trip() {
    local src="$1" name="$2" impl="$3"
    shift 3
    ckpt hf2mcore "$src" "$OUT/$name-mc" --transformer-impl "$impl" -q "$@"
    ckpt mcore2hf "$OUT/$name-mc" "$OUT/$name-hf" -q
    cmp "$src/model.safetensors" "$OUT/$name-hf/model.safetensors"
}

for set in hf hf/transformers5; do
    for family in qwen2 mistral llama3; do
        src="$TESTDATA/$set/${family}_tiny"
        name="$(echo "$set" | tr / _)-$family"
        queue hf "$set $family: the forward pass gives transformers' logits" logits "$src" "$src/logits.json"
        case_run "$set $family -> mcore TP2 PP2 (local) -> HF: the same tensors" \
            round_trip "$src" "$name-a" local --tp 2 --pp 2
        case_run "$set $family -> mcore TP2 (TE) -> HF: the same tensors" \
            round_trip "$src" "$name-b" transformer_engine --tp 2
        # shellcheck disable=SC2046
        queue hf "$set $family round trip: the family's config.json" config "$OUT/$name-a-hf" $(expect "$family")
        queue hf "$set $family round trip: transformers' logits" logits "$OUT/$name-b-hf" "$src/logits.json"
    done
done
run_batch hf
finish
