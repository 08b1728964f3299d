#!/usr/bin/env bash
# Transformer Engine's grouped GEMM experts (TEGroupedMLP) as torch writes them from the facts
# of megatron-core 0.16.1 and Transformer Engine (te_grouped.py, apart from ckptconv; no
# Transformer Engine runs here to save one): ckptconv writes the same keys in the same order
# and the same tensors from Mixtral's SequentialMLP set, also with biases (bias<i> right after
# weight<i>), and reads that set back to SequentialMLP byte for byte. A wrong-shaped weight<i>, FP8 _extra_state kept (--extra-state
# copy) and the optimizer state of such a set are refused naming the file and the tensor.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch

R=iter_0000001
te() { "$TORCH_PYTHON" "$INTEROP_DIR/te_grouped.py" "$@"; }
keys() { "$CKPTCONV" inspect "$1" | awk '/^model\//{print $1}'; }

written_alike() {
    cd "$WORK" || return 1
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

# Experts with biases (--add-bias-linear, given here to Mixtral's): GroupedLinear registers
# bias<i> right after weight<i>; through expert TP 2 (fc1's bias cut, fc2's whole) and back
with_bias() {
    cd "$WORK" || return 1
    "$TORCH_PYTHON" - seq bseq <<'PY'
import re
import shutil
import sys
from collections import OrderedDict

import torch

src, dst = sys.argv[1:3]
shutil.copytree(src, dst)
for rank in ("mp_rank_00_000", "mp_rank_00_001"):
    path = f"{dst}/iter_0000001/{rank}/model_optim_rng.pt"
    sd = torch.load(path)
    model = OrderedDict()
    for k, v in sd["model"].items():
        model[k] = v
        m = re.match(r"(.*local_experts\.\d+\.linear_fc[12])\.weight$", k)
        if m:
            model[m.group(1) + ".bias"] = torch.arange(v.shape[0], dtype=v.dtype) + len(model)
    sd["model"] = model
    sd["args"].add_bias_linear = True
    torch.save(sd, path)
PY
    te bseq bpy
    ckpt reshard bseq bours --tp 1 --pp 1 --moe-grouped-gemm on -q
    keys bours/$R/mp_rank_00_000/model_optim_rng.pt | grep -q 'layers\.0\.mlp\.experts\.linear_fc1\.bias1'
    for f in bours/$R/mp_rank_*/*.pt; do
        keys "$f" | cmp - <(keys "bpy/${f#bours/}")
        ckpt diff -q "$f" "bpy/${f#bours/}"
    done
    ckpt reshard -q bpy btp2 --tp 2 --pp 1 --ep 1
    ckpt reshard -q btp2 bback --tp 1 --pp 1 --ep 2
    for f in bours/$R/mp_rank_*/*.pt; do cmp "$f" "bback/${f#bours/}"; done
    ckpt reshard -q bpy bseq.back --tp 1 --pp 1 --moe-grouped-gemm off
    ckpt reshard -q bseq bseq.same --tp 1 --pp 1
    for f in bseq.same/$R/mp_rank_*/*.pt; do cmp "$f" "bseq.back/${f#bseq.same/}"; done
}

# refused CASE PATTERN ARGS...: te_grouped.py --break CASE's set is refused with PATTERN
refused() {
    local how="$1" pattern="$2"
    shift 2
    cd "$WORK" || return 1
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
    cd "$WORK" || return 1
    ckpt reshard fp8 fp8.empty --tp 1 --pp 1 --ep 1 --extra-state empty -q
}

optimizer() {
    cd "$WORK" || return 1
    ckpt reshard -q "$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy" plain --tp 1 --pp 1 --to-optimizer plain
    te plain plain_te --impl transformer_engine
    if "$CKPTCONV" reshard plain_te out --tp 1 --pp 1 2>err; then return 1; fi
    grep -q "plain_te: the optimizer state of TEGroupedMLP's linear_fc1/linear_fc2.weight<i> is not read yet" err
    ckpt reshard -q plain_te model --tp 1 --pp 1 --no-optimizer --moe-grouped-gemm off
    ckpt reshard -q plain plain_model --tp 1 --pp 1 --no-optimizer
    for f in plain_model/iter_0000003/mp_rank_*/*.pt; do ckpt diff -q "$f" "model/${f#plain_model/}"; done
}

case_run "SequentialMLP -> TEGroupedMLP: te_grouped.py's keys, order, tensors; and back" written_alike
case_run "biases: weight<i>, bias<i> in turn; TP 2 EP 1 and back; SequentialMLP" with_bias
case_run "wrong-shaped weight<i>: refused" refused shape \
    "shape/$R/mp_rank_00_001/model_optim_rng.pt: 'decoder.layers.0.mlp.experts.linear_fc1.weight1' is \[63, 32\]"
case_run "FP8 _extra_state kept: refused" refused fp8 \
    "fp8/$R/mp_rank_00_001/model_optim_rng.pt: 'decoder.layers.0.mlp.experts.linear_fc1._extra_state'"
case_run "FP8 _extra_state, --extra-state empty: written" fp8_empty
case_run "TEGroupedMLP with optimizer state: refused; the model without" optimizer
finish
