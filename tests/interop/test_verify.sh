#!/usr/bin/env bash
# `ckptconv verify` on the real fixtures (testdata/megatron, testdata/hf, testdata/llama,
# testdata/zero), on the CPU (VERIFY_DEVICE=cuda: on a GPU, the same checks):
#  - it passes on what every converter writes from them: pd2te/te2pd, reshard, hf2mcore/
#    mcore2hf, zero-to-fp32, and on each tensor-parallel checkpoint against its own merge and
#    a ZeRO checkpoint's module weights against its consolidated masters;
#  - it fails, exit 1, naming the broken layer first, on conversions broken on purpose
#    (tests/interop/verify_break.py): two q heads swapped in one layer, a missing transpose,
#    gate/up halves swapped on one TP rank, a TP shard of fc1 cut naively, a RoPE permutation
#    applied to one layer's q/k, bfloat16 values truncated instead of rounded; and a TP
#    checkpoint alone whose ranks disagree on a replicated norm (merging would hide it);
#  - --json has the documented shape.
# The frameworks' own logits are reproduced by the CPU core in the unit test test_verify.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "numpy, safetensors, torch"
DEVICE="${VERIFY_DEVICE:-cpu}"

MT="$TESTDATA/megatron"
HF="$TESTDATA/hf/llama_tiny"
PD="$TESTDATA/llama"
OUT="$WORK/out"
mkdir -p "$OUT"

brk() { "$VENV_PYTHON" "$INTEROP_DIR/verify_break.py" "$@"; }

# verify_passes A [B] [flags]: exit 0 and "pass": true.
verify_passes() {
    local json="$WORK/verify.json"
    "$CKPTCONV" verify "$@" --device "$DEVICE" --json >"$json"
    "$VENV_PYTHON" - "$json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["pass"] is True, r
assert all(e["pass"] for e in r["layers"]), r["layers"]
assert any(e["name"] == "logits" for e in r["layers"]) or "no logits" in sys.argv[1]
EOF
}

# verify_fails_at NAME A B [flags]: exit 1 and NAME is the first failing entry.
verify_fails_at() {
    local first="$1" json="$WORK/verify.json" rc=0
    shift
    "$CKPTCONV" verify "$@" --device "$DEVICE" --json >"$json" || rc=$?
    [ "$rc" = 1 ] || { echo "exit status $rc, expected 1"; return 1; }
    "$VENV_PYTHON" - "$json" "$first" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["pass"] is False and r["first_failure"] == sys.argv[2], (r["first_failure"], sys.argv[2])
bad = [e["name"] for e in r["layers"] if not e["pass"]]
assert bad[0] == sys.argv[2], bad
print("first failing:", bad[0], "of", bad)
EOF
}

# ---- passes on converters' outputs ----
case_run "pd2te output (TP 2) against its input" sh -c "
    '$CKPTCONV' pd2te '$PD/fp32_tp2' '$OUT/te_tp2' -q"
case_run "verify fp32_tp2 te_tp2" verify_passes "$PD/fp32_tp2" "$OUT/te_tp2"
case_run "pd2te then te2pd (bf16, PP 2) against the input" sh -c "
    '$CKPTCONV' pd2te '$PD/bf16_pp2' '$OUT/te_pp2' -q &&
    '$CKPTCONV' te2pd '$OUT/te_pp2' '$OUT/pd_pp2' -q"
case_run "verify bf16_pp2 te" verify_passes "$PD/bf16_pp2" "$OUT/te_pp2"
case_run "verify bf16_pp2 te2pd(pd2te)" verify_passes "$PD/bf16_pp2" "$OUT/pd_pp2"
case_run "fused qkv and unfused ffn PaddleNLP layouts against pd2te's output" sh -c "
    '$CKPTCONV' pd2te '$PD/fused_qkv_tp1' '$OUT/te_fq' -q && '$CKPTCONV' pd2te '$PD/unfused_ffn_tp1' '$OUT/te_uf' -q"
case_run "verify fused_qkv_tp1 te" verify_passes "$PD/fused_qkv_tp1" "$OUT/te_fq"
case_run "verify unfused_ffn_tp1 te" verify_passes "$PD/unfused_ffn_tp1" "$OUT/te_uf"

case_run "reshard tp2pp2_bf16_optim -> TP4 PP1" ckpt reshard "$MT/tp2pp2_bf16_optim" "$OUT/r_tp4" --tp 4 --pp 1 -q
case_run "verify TP2 PP2 against its TP4 reshard (both run as ranks)" verify_passes "$MT/tp2pp2_bf16_optim" "$OUT/r_tp4"
case_run "verify tp1 against megatron-core's own TP4 of it (2 query groups < 4 ranks)" \
    verify_passes "$MT/tp1" "$MT/tp4_ng2"
case_run "verify tp1 against megatron-core's own PP2 VPP2" verify_passes "$MT/tp1" "$MT/pp2_vpp2"
case_run "verify a TP4 checkpoint alone: ranks against their merge" verify_passes "$MT/tp4_ng2"
case_run "verify the GPT-2 style TP2 alone (LayerNorm, GELU, biases, learned positions, QK norm, tied)" \
    verify_passes "$MT/gpt2style_tp2"
case_run "reshard gpt2style to TP1 PP2" ckpt reshard "$MT/gpt2style_tp2" "$OUT/g_pp2" --tp 1 --pp 2 -q
case_run "verify gpt2style TP2 against its TP1 PP2 reshard" verify_passes "$MT/gpt2style_tp2" "$OUT/g_pp2"

case_run "hf2mcore TP2 PP2, mcore2hf back" sh -c "
    '$CKPTCONV' hf2mcore '$HF' '$OUT/mc' --tp 2 --pp 2 -q && '$CKPTCONV' mcore2hf '$OUT/mc' '$OUT/hf_back' -q"
case_run "verify HF against hf2mcore's TP2 PP2" verify_passes "$HF" "$OUT/mc"
case_run "verify hf2mcore's output against mcore2hf of it" verify_passes "$OUT/mc" "$OUT/hf_back"
case_run "mcore2hf of megatron-core's TP2 PP2" ckpt mcore2hf "$MT/tp2pp2" "$OUT/hf_tp2pp2" -q
case_run "verify megatron-core's TP2 PP2 against mcore2hf's output" verify_passes "$MT/tp2pp2" "$OUT/hf_tp2pp2"

for zero in llama_stage2_bf16_ws2 llama_stage3_bf16_ws2; do
    case_run "zero-to-fp32 $zero" sh -c "
        '$CKPTCONV' zero-to-fp32 '$TESTDATA/zero/$zero' '$OUT/$zero' --safe-serialization -q &&
        cp '$TESTDATA/zero/$zero/config.json' '$OUT/$zero/'"
    case_run "verify $zero against its zero-to-fp32 output" verify_passes "$TESTDATA/zero/$zero" "$OUT/$zero"
done
case_run "verify a ZeRO-2 checkpoint alone: module weights against consolidated masters" \
    verify_passes "$TESTDATA/zero/llama_stage2_bf16_ws2"

# ---- fails on conversions broken on purpose, naming the layer ----
case_run "hf2mcore TP2" ckpt hf2mcore "$HF" "$OUT/mc_tp2" --tp 2 -q
case_run "break: two q heads swapped in layer 2 of hf2mcore's TP2 output" \
    brk swap_heads "$OUT/mc_tp2" "$OUT/b_heads" 2
case_run "verify names layer 2 (swapped heads)" verify_fails_at "layer 2" "$HF" "$OUT/b_heads"
case_run "break: layer 1's proj.weight not transposed by pd2te" brk no_transpose "$OUT/te_fq" "$OUT/b_tr" 1
case_run "verify names layer 1 (missing transpose)" verify_fails_at "layer 1" "$PD/fused_qkv_tp1" "$OUT/b_tr"
case_run "break: gate and up swapped on rank 1 of layer 1" brk swap_gate_up "$MT/tp2" "$OUT/b_gu" 1
case_run "verify names layer 1 (gate/up swapped on one rank)" verify_fails_at "layer 1" "$MT/tp1" "$OUT/b_gu"
case_run "break: rank 1's copy of layer 2's input norm differs from rank 0's" brk diverge_norm "$MT/tp2" "$OUT/b_norm" 2
case_run "verify names layer 2 with the TP2 checkpoint alone (ranks against their merge)" \
    verify_fails_at "layer 2" "$OUT/b_norm"
case_run "break: layer 3's fc1 cut naively over TP 2" brk naive_fc1 "$MT/tp2" "$OUT/b_naive" 3
case_run "verify names layer 3 (naive fc1 chunk, Megatron-LM#360)" verify_fails_at "layer 3" "$MT/tp1" "$OUT/b_naive"
case_run "break: RoPE permutation applied to layer 2's q and k" brk rope_permute "$HF" "$OUT/b_rope" 2
case_run "verify names layer 2 (RoPE permutation)" verify_fails_at "layer 2" "$HF" "$OUT/b_rope"
case_run "break: float32 -> bfloat16 by truncation" brk truncate_bf16 "$HF" "$OUT/b_trunc"
case_run "verify names layer 0 (truncated, not rounded)" verify_fails_at "layer 0" "$HF" "$OUT/b_trunc"

# ---- the report ----
case_run "--json shape, --layers, --tokens" sh -c "
    '$CKPTCONV' verify '$MT/tp1' '$MT/tp2' --device '$DEVICE' --json --layers 1,3 --tokens 9 --seed 5 >'$WORK/j.json' &&
    '$VENV_PYTHON' - '$WORK/j.json' '$DEVICE' <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert set(r) >= {'pass', 'device', 'layers', 'tol', 'tokens', 'seed'}, sorted(r)
assert r['pass'] is True and r['tokens'] == 9 and r['seed'] == 5 and r['device'].startswith('CPU') == (sys.argv[2] == 'cpu')
layers = [e for e in r['layers'] if 'index' in e]
assert [e['index'] for e in layers] == [1, 3], layers
assert [e['name'] for e in r['layers'] if 'index' not in e] == ['embedding', 'final_norm', 'logits']
for e in r['layers']:
    assert set(e) >= {'name', 'max_abs', 'rel_l2', 'cosine', 'pass'}, e
    assert 0.99999 < e['cosine'] <= 1.0000001 and e['rel_l2'] < 1e-5, e
EOF"

finish
