#!/usr/bin/env bash
# GPT-2 (GPT2LMHeadModel) that transformers 4 and 5 wrote (testdata/hf/gpt2_tiny,
# testdata/hf/transformers5/gpt2_tiny; testdata/gen/README_hf_families.md): the forward pass
# written here from GPT-2's definition (hf_gpt2_check.py: Conv1D, LayerNorm with biases,
# gelu_new, learned positions, tied lm_head) gives transformers' own logits, so that it can
# judge what ckptconv writes; under the hub's GPT2Model names (no transformer. prefix) too.
# HF -> Megatron (TP2 PP2 local names, TP2 TE names) -> HF gives back model.safetensors byte
# for byte, a GPT2LMHeadModel config.json, and transformers' logits.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "numpy, safetensors"

OUT="$WORK/out"
mkdir -p "$OUT"
gpt2_py() { "$VENV_PYTHON" "$INTEROP_DIR/hf_gpt2_check.py" "$@"; }

# hub_names SRC DST: SRC's weights saved under GPT2Model's names
hub_names() {
    mkdir -p "$2"
    cp "$1/config.json" "$2/"
    "$VENV_PYTHON" - "$1/model.safetensors" "$2/model.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file, save_file
w = load_file(sys.argv[1])
save_file({k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in w.items()}, sys.argv[2])
PY
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
    src="$TESTDATA/$set/gpt2_tiny"
    name="$(echo "$set" | tr / _)"
    queue gpt2 "$set gpt2: the forward pass gives transformers' logits" logits "$src" "$src/logits.json"
    case_run "$set gpt2: GPT2Model names" hub_names "$src" "$OUT/$name-hub"
    queue gpt2 "$set gpt2 under GPT2Model names: transformers' logits" logits "$OUT/$name-hub" "$src/logits.json"
    case_run "$set gpt2 -> mcore TP2 PP2 (local) -> HF: the same tensors" round_trip "$src" "$name-a" local --tp 2 --pp 2
    case_run "$set gpt2 -> mcore TP2 (TE) -> HF: the same tensors" round_trip "$src" "$name-b" transformer_engine --tp 2
    queue gpt2 "$set gpt2 round trip: a GPT-2 config.json" config "$OUT/$name-a-hf" 'model_type="gpt2"' \
        'architectures=["GPT2LMHeadModel"]' 'activation_function="gelu_new"' 'n_embd=32' 'n_layer=2' 'n_head=4' \
        'n_positions=64' 'tie_word_embeddings=true'
    queue gpt2 "$set gpt2 round trip: transformers' logits" logits "$OUT/$name-b-hf" "$src/logits.json"
done
run_batch gpt2
finish
