#!/usr/bin/env bash
# Real DeepSpeed ZeRO 1/2/3 checkpoints (testdata/zero) opened as a directory and converted
# to one .pt with --dtype float32 (what zero_to_fp32 does to floating tensors) equal
# DeepSpeed's own zero_to_fp32 output under torch.load: names, order, dtypes, values, ties.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch

n=0
for ref in "$TESTDATA"/zero/*/expected/pytorch_model.bin; do
    case_dir=$(dirname "$(dirname "$ref")")
    name=$(basename "$case_dir")
    out="$WORK/$name.pt"
    "$CKPTCONV" convert -q --dtype float32 "$case_dir" "$out"
    "$TORCH_PYTHON" "$INTEROP_DIR/zero_check.py" "$out" "$ref"
    n=$((n + 1))
done
[ "$n" -gt 0 ] || die "no DeepSpeed fixtures under $TESTDATA/zero"
echo "$n passed, 0 failed"
