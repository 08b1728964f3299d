#!/usr/bin/env bash
# Gemma 3 with the RoPE of gemma-3-4b/12b/27b: linear scaling (factor 8) of the full-attention
# layers only, as transformers 5.24 (testdata/hf/transformers5/gemma3_linear_tiny,
# rope_parameters per layer type) and 4.53 (testdata/hf/gemma3_linear_tiny, rope_scaling
# beside rope_theta and rope_local_base_freq) wrote it; testdata/gen/README_hf_families.md.
# Judged as test_family_gemma3.sh judges gemma3_tiny, by gemma3_check.py's numpy forwards:
#  - the Hugging Face forward (full layers' positions divided by the factor, sliding layers
#    unscaled with their own base) gives each fixture's transformers logits, and without the
#    factor it does not (so the fixtures tell scaled from unscaled);
#  - HF -> Megatron TP2 PP2 -> HF gives back model.safetensors byte for byte and a config.json
#    whose RoPE (rope_parameters.full_attention linear, factor 8, for transformers 5, and the
#    same in rope_scaling for 4.5x) gives transformers' logits, read as 5 reads it and as
#    4.50-4.52 read it (rope_scaling, rope_theta, rope_local_base_freq, sliding_window_pattern);
#  - the Megatron side at TP1 PP1, run as Megatron-Bridge's Gemma 3 runs from its args
#    (hf_rope_scaling_factor dividing the global inv_freq only), gives them too.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "numpy, safetensors, torch"

gemma_py() { "$VENV_PYTHON" "$INTEROP_DIR/gemma3_check.py" "$@"; }

round_trip() {
    local src="$1" out="$2"
    ckpt hf2mcore "$src" "$out/mc" --tp 2 --pp 2 -q
    ckpt mcore2hf "$out/mc" "$out/hf" -q
    cmp "$src/model.safetensors" "$out/hf/model.safetensors"
    ckpt reshard "$out/mc" "$out/mc1" --tp 1 --pp 1 -q
}

unscaled_differs() {
    local src="$1" out="$2"
    mkdir -p "$out/unscaled"
    cp "$src/model.safetensors" "$out/unscaled/"
    "$VENV_PYTHON" - "$src/config.json" "$out/unscaled/config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg.pop("rope_scaling", None)
if "rope_parameters" in cfg:
    cfg["rope_parameters"]["full_attention"] = {"rope_type": "default", "rope_theta": 1000000.0}
json.dump(cfg, open(sys.argv[2], "w"))
PY
    if gemma_py logits "$out/unscaled" "$src/logits.json"; then
        echo "the forward without the factor gives transformers' logits too"
        return 1
    fi
}

for m in transformers5/gemma3_linear_tiny gemma3_linear_tiny; do
    src="$TESTDATA/hf/$m"
    ref="$src/logits.json"
    out="$WORK/$(echo "$m" | tr / _)"
    mkdir -p "$out"
    queue gemma "$m: the forward pass gives transformers' logits" logits "$src" "$ref"
    case_run "$m: the forward without the factor gives other logits" unscaled_differs "$src" "$out"
    case_run "$m: HF -> mcore TP2 PP2 (TE) -> HF: the same tensors" round_trip "$src" "$out"
    queue gemma "$m round trip: linear RoPE on the full layers" config "$out/hf" 'model_type="gemma3_text"' \
        'rope_parameters={"full_attention":{"factor":8.0,"rope_theta":1000000.0,"rope_type":"linear"},"sliding_attention":{"rope_theta":10000.0,"rope_type":"default"}}' \
        'layer_types=["sliding_attention","full_attention"]' 'rope_scaling={"factor":8.0,"rope_type":"linear"}' \
        'rope_theta=1000000.0' 'rope_local_base_freq=10000.0' 'sliding_window_pattern=2'
    queue gemma "$m round trip: transformers' logits" logits "$out/hf" "$ref"
    queue gemma "$m round trip, read as transformers 4.50-4.52 read it: transformers' logits" logits450 "$out/hf" "$ref"
    queue gemma "$m: Megatron side at TP1 PP1, run as Megatron-Bridge's Gemma 3: transformers' logits" mcore \
        "$out/mc1/iter_0000001/mp_rank_00/model_optim_rng.pt" "$ref"
done
run_batch gemma
finish
