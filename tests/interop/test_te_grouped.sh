#!/usr/bin/env bash
# Transformer Engine's grouped GEMM experts (TEGroupedMLP) as torch writes them from the facts
# of megatron-core 0.16.1 and Transformer Engine (te_grouped.py, apart from ckptconv; no
# Transformer Engine runs here to save one): ckptconv writes the same keys in the same order
# and the same tensors from Mixtral's SequentialMLP set, and reads that set back to
# SequentialMLP byte for byte. A wrong-shaped weight<i>, FP8 _extra_state kept (--extra-state
# copy) and the optimizer state of such a set are refused naming the file and the tensor.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch

R=iter_0000001
te() { "$TORCH_PYTHON" "$INTEROP_DIR/te_grouped.py" "$@"; }
keys() { "$CKPTCONV" inspect "$1" | awk '/^model\//{print $1}'; }

written_alike() {
    cd "$WORK"
    ckpt hf2mcore "$TESTDATA/hf/mixtral_tiny" seq --ep 2 -q
    te seq py
    ckpt reshard seq ours --tp 1 --pp 1 --moe-grouped-gemm on -q
    for f in ours/$R/mp_rank_*/*.pt; do
        keys "$f" | cmp - <(keys "py/${f#ours/}")
        ckpt diff -q "$f" "py/${f#ours/}"
    done
    ckpt reshard py back --tp 1 --pp 1 --moe-grouped-gemm off -q
    for f in seq/$R/mp_rank_*/*.pt; do cmp "$f" "back/${f#seq/}"; done
}

# refused CASE PATTERN ARGS...: te_grouped.py --break CASE's set is refused with PATTERN
refused() {
    local how="$1" pattern="$2"
    shift 2
    cd "$WORK"
    rm -rf "$how" out
    te seq "$how" --break "$how"
    if "$CKPTCONV" reshard "$how" out --tp 1 --pp 1 --ep 1 "$@" 2>err; then
        echo "$how: written"
        return 1
    fi
    grep -q -- "$pattern" err || { cat err; return 1; }
    test ! -e out
}

fp8_empty() {
    cd "$WORK"
    ckpt reshard fp8 fp8.empty --tp 1 --pp 1 --ep 1 --extra-state empty -q
}

optimizer() {
    cd "$WORK"
    ckpt reshard -q "$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy" plain --tp 1 --pp 1 --to-optimizer plain
    te plain plain_te --impl transformer_engine
    if "$CKPTCONV" reshard plain_te out --tp 1 --pp 1 2>err; then return 1; fi
    grep -q "plain_te: the optimizer state of TEGroupedMLP's linear_fc1/linear_fc2.weight<i> is not read yet" err
    ckpt reshard -q plain_te model --tp 1 --pp 1 --no-optimizer --moe-grouped-gemm off
    ckpt reshard -q plain plain_model --tp 1 --pp 1 --no-optimizer
    for f in plain_model/iter_0000003/mp_rank_*/*.pt; do ckpt diff -q "$f" "model/${f#plain_model/}"; done
}

case_run "SequentialMLP -> TEGroupedMLP: te_grouped.py's keys, order, tensors; and back" written_alike
case_run "wrong-shaped weight<i>: refused" refused shape \
    "shape/$R/mp_rank_00_001/model_optim_rng.pt: 'decoder.layers.0.mlp.experts.linear_fc1.weight1' is \[63, 32\]"
case_run "FP8 _extra_state kept: refused" refused fp8 \
    "fp8/$R/mp_rank_00_001/model_optim_rng.pt: 'decoder.layers.0.mlp.experts.linear_fc1._extra_state'"
case_run "FP8 _extra_state, --extra-state empty: written" fp8_empty
case_run "TEGroupedMLP with optimizer state: refused; the model without" optimizer
finish
