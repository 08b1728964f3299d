#!/usr/bin/env bash
# PaddleNLP's Qwen2 (testdata/paddlenlp/qwen2_tp2: testdata/hf/qwen2_tiny's weights saved by
# PaddleNLP 3 at TP 2; testdata/gen/README_paddlenlp3.md):
#  - paddle2hf merges the ranks into a Hugging Face directory whose forward pass gives
#    transformers' logits (and PaddleNLP's own), with a Qwen2 config.json;
#  - reshard at the same layout gives PaddleNLP's own files back (tensors, variable names);
#  - hf2paddle at TP 2 -> reshard to TP 1 (and back to TP 2 PP 2) -> paddle2hf gives back
#    model.safetensors byte for byte.
# And its fused save (testdata/paddlenlp/qwen2_tp2_fused: the same weights with
# fuse_attention_qkv and fuse_attention_ffn):
#  - paddle2hf gives qwen2_tiny's tensors, whose forward gives the fused model's own logits;
#  - reshard at the same layout gives PaddleNLP's files back (raw pickle and paddle.load);
#  - hf2paddle --fused-qkv --fused-ffn at TP 2 gives PaddleNLP's tensors (paddle.load), and
#    reshard of it to TP 1 -> TP 2 PP 2 -> paddle2hf gives back model.safetensors.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "paddle, numpy, safetensors"

OUT="$WORK/out"
mkdir -p "$OUT"
SRC="$TESTDATA/paddlenlp/qwen2_tp2"
HF="$TESTDATA/hf/qwen2_tiny"
hf_py() { "$VENV_PYTHON" "$INTEROP_DIR/hf_llama_check.py" "$@"; }

to_hf() {
    ckpt paddle2hf "$SRC" "$OUT/p2h" -q
    cmp "$HF/model.safetensors" "$OUT/p2h/model.safetensors"
}

# round_trip NAME RESHARD_FLAGS...
round_trip() {
    local name="$1"
    shift
    ckpt hf2paddle "$HF" "$OUT/$name-pd" --tp 2 -q
    ckpt reshard "$OUT/$name-pd" "$OUT/$name-rs" -q "$@"
    ckpt paddle2hf "$OUT/$name-rs" "$OUT/$name-hf" -q
    cmp "$HF/model.safetensors" "$OUT/$name-hf/model.safetensors"
}

# reshard to the same layout: the files PaddleNLP wrote, name table included (q/k/v biases
# linear_N.b_0, the tied head the embedding's own variable)
same_layout() {
    ckpt reshard "$SRC" "$OUT/same" -q
    "$VENV_PYTHON" - "$SRC" "$OUT/same" <<'PY'
import pickle, sys
import numpy as np
for rank in ("tp00", "tp01"):
    a, b = (pickle.load(open(f"{d}/model_state.{rank}.pdparams", "rb")) for d in sys.argv[1:3])
    assert list(a) == list(b), (rank, list(a), list(b))
    for k in a:
        assert (a[k] == b[k]) if isinstance(a[k], dict) else np.array_equal(a[k], b[k]), (rank, k)
PY
}

# TP 4 over 2 KV heads: PaddleNLP keeps k/v and their biases whole on every rank
kv_whole() {
    ckpt hf2paddle "$HF" "$OUT/tp4-pd" --tp 4 --pp 2 -q
    ckpt paddle2hf "$OUT/tp4-pd" "$OUT/tp4-hf" -q
    cmp "$HF/model.safetensors" "$OUT/tp4-hf/model.safetensors"
}

FUSED="$TESTDATA/paddlenlp/qwen2_tp2_fused"

fused_to_hf() {
    ckpt paddle2hf "$FUSED" "$OUT/fused-p2h" -q
    cmp "$HF/model.safetensors" "$OUT/fused-p2h/model.safetensors"
}

fused_same_layout() {
    ckpt reshard "$FUSED" "$OUT/fused-same" -q
    cmp "$FUSED/config.json" "$OUT/fused-same/config.json"
    for r in tp00 tp01; do
        queue pd "qwen2_tp2_fused reshard: model_state.$r raw" raw_equal "$FUSED/model_state.$r.pdparams" \
            "$OUT/fused-same/model_state.$r.pdparams"
        queue pd "qwen2_tp2_fused reshard: model_state.$r paddle.load" equal "$FUSED/model_state.$r.pdparams" \
            "$OUT/fused-same/model_state.$r.pdparams"
    done
}

# hf2paddle leaves the tied head out (PaddleNLP saves the embedding
# again under lm_head.weight); every tensor it writes is PaddleNLP's, after paddle.load
fused_from_hf() {
    ckpt hf2paddle "$HF" "$OUT/fused-pd" --tp 2 --fused-qkv --fused-ffn -q
    "$VENV_PYTHON" - "$FUSED" "$OUT/fused-pd" <<'PY'
import sys
import numpy as np
import paddle
for rank in ("tp00", "tp01"):
    want, got = (paddle.load(f"{d}/model_state.{rank}.pdparams") for d in sys.argv[1:3])
    assert set(want) - set(got) == {"lm_head.weight"} and set(got) <= set(want), (rank, sorted(got))
    for k, v in got.items():
        assert np.array_equal(np.asarray(v), np.asarray(want[k])), (rank, k)
PY
    ckpt reshard "$OUT/fused-pd" "$OUT/fused-tp1" --tp 1 -q
    ckpt reshard "$OUT/fused-tp1" "$OUT/fused-pp2" --tp 2 --pp 2 -q
    ckpt paddle2hf "$OUT/fused-pp2" "$OUT/fused-back" -q
    cmp "$HF/model.safetensors" "$OUT/fused-back/model.safetensors"
}

case_run "qwen2_tp2 -> paddle2hf: qwen2_tiny's tensors" to_hf
case_run "qwen2_tiny -> hf2paddle TP4 PP2 (KV heads whole) -> paddle2hf: the same tensors" kv_whole
case_run "qwen2_tp2 -> reshard TP2: PaddleNLP's files and variable names" same_layout
queue hf "qwen2_tp2 -> paddle2hf: transformers' logits" logits "$OUT/p2h" "$HF/logits.json"
queue hf "qwen2_tp2 -> paddle2hf: PaddleNLP's logits" logits "$OUT/p2h" "$SRC/logits.json"
queue hf "qwen2_tp2 -> paddle2hf: a Qwen2 config.json" config "$OUT/p2h" 'model_type="qwen2"' \
    'architectures=["Qwen2ForCausalLM"]' 'use_sliding_window=false' 'rope_theta=1000000.0' 'tie_word_embeddings=true'
case_run "qwen2_tp2_fused -> paddle2hf: qwen2_tiny's tensors" fused_to_hf
queue hf "qwen2_tp2_fused -> paddle2hf: PaddleNLP's fused model's logits" logits "$OUT/fused-p2h" "$FUSED/logits.json"
case_run "qwen2_tp2_fused -> reshard TP2: config.json" fused_same_layout
case_run "qwen2_tiny -> hf2paddle TP2 --fused-qkv --fused-ffn: PaddleNLP's tensors; -> TP1 -> TP2 PP2 -> paddle2hf" \
    fused_from_hf
case_run "qwen2_tiny -> hf2paddle TP2 -> reshard TP1 -> paddle2hf: the same tensors" round_trip tp1 --tp 1
case_run "qwen2_tiny -> hf2paddle TP2 -> reshard TP2 PP2 -> paddle2hf: the same tensors" round_trip pp2 --tp 2 --pp 2
run_batch hf
run_batch pd
finish
