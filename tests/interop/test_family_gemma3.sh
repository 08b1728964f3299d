#!/usr/bin/env bash
# Gemma 3 (testdata/hf/transformers5/gemma3_tiny, Gemma3ForCausalLM written by transformers 5;
# testdata/gen/README_hf_families.md) through hf2mcore and mcore2hf, judged by two forward
# passes written here (gemma3_check.py, numpy):
#  - the Hugging Face forward (sandwich norms, (1 + w) norms, GeGLU, sliding and full layers
#    with their own RoPE bases, query_pre_attn_scalar, scaled embeddings) gives transformers'
#    logits on the fixture;
#  - HF -> Megatron TP2 PP2 (Megatron-Bridge's TE names) -> HF gives back model.safetensors byte
#    for byte and a gemma3_text config.json with transformers' logits, read as transformers 5
#    and 4.53+ read it and as 4.50-4.52 read it (no rope_parameters, no layer_types);
#  - the Megatron side, resharded to TP1 PP1, run as Megatron-Bridge's Gemma 3 runs from its
#    args alone, gives transformers' logits too (megatron-core 0.16.1 cannot build Gemma 3:
#    no post norms in its layer specs, one RoPE base, no embedding scale, and its local spec's
#    torch norms assert on zero-centred gamma);
#  - local layer names are refused with the reason.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "numpy, safetensors, torch"

OUT="$WORK/out"
mkdir -p "$OUT"
gemma_py() { "$VENV_PYTHON" "$INTEROP_DIR/gemma3_check.py" "$@"; }

src="$TESTDATA/hf/transformers5/gemma3_tiny"
ref="$src/logits.json"

to_megatron_and_back() {
    ckpt hf2mcore "$src" "$OUT/mc" --tp 2 --pp 2 -q
    ckpt mcore2hf "$OUT/mc" "$OUT/hf" -q
    cmp "$src/model.safetensors" "$OUT/hf/model.safetensors"
    ckpt reshard "$OUT/mc" "$OUT/mc1" --tp 1 --pp 1 -q
}

local_refused() {
    mkdir -p "$OUT/local"
    expect_refusal "$OUT/local" "$WORK/local.err" "local" "post" -- \
        "$CKPTCONV" hf2mcore "$src" "$OUT/local/mc" --transformer-impl local
}

queue gemma "the forward pass gives transformers' logits" logits "$src" "$ref"
case_run "HF -> mcore TP2 PP2 (TE) -> HF: the same tensors" to_megatron_and_back
queue gemma "round trip: a gemma3_text config.json" config "$OUT/hf" 'model_type="gemma3_text"' \
    'architectures=["Gemma3ForCausalLM"]' 'query_pre_attn_scalar=24' 'sliding_window=4' \
    'layer_types=["sliding_attention","sliding_attention","sliding_attention","full_attention"]' \
    'tie_word_embeddings=true' 'hidden_activation="gelu_pytorch_tanh"'
queue gemma "round trip: transformers' logits" logits "$OUT/hf" "$ref"
queue gemma "round trip, read as transformers 4.50-4.52 read it: transformers' logits" logits450 "$OUT/hf" "$ref"
queue gemma "Megatron side at TP1 PP1, run as Megatron-Bridge's Gemma 3: transformers' logits" mcore \
    "$OUT/mc1/iter_0000001/mp_rank_00/model_optim_rng.pt" "$ref"
case_run "--transformer-impl local is refused, saying why" local_refused
run_batch gemma
finish
