#!/usr/bin/env bash
# PyTorch Distributed Checkpoints read by ckptconv at their global shapes:
# - the plain DCP fixture (torch.distributed.checkpoint.save, world size 2: Shard(0) uneven,
#   Shard(1), Replicate, scalars, bytes items) consolidated to .safetensors equals what DCP
#   itself reads back (expected.json), under the real safetensors loader;
# - every megatron-core torch_dist fixture consolidated to .pt equals, per layer and bit for
#   bit, the legacy fixture of the same weights (TP-merged), Adam's moments included, under
#   the real torch.load;
# - consolidating twice gives the same bytes.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "safetensors"

CHECK="$INTEROP_DIR/dcp_check.py"

plain() {
    ckpt convert -q "$TESTDATA/dcp" "$WORK/plain.safetensors"
    ckpt convert -q --threads 1 "$TESTDATA/dcp" "$WORK/plain1.safetensors"
    cmp "$WORK/plain.safetensors" "$WORK/plain1.safetensors"
    "$VENV_PYTHON" "$CHECK" plain "$WORK/plain.safetensors" "$TESTDATA/dcp/expected.json"
}

megatron() {
    local dist="$1" legacy="$2"
    shift 2
    ckpt convert -q "$TESTDATA/megatron/$dist/iter_0000010" "$WORK/$dist.pt"
    "$TORCH_PYTHON" "$CHECK" megatron "$WORK/$dist.pt" "$TESTDATA/megatron/$legacy" "$@"
}

case_run "plain DCP (world size 2) -> .safetensors equals DCP's own read" plain
case_run "dist_tp1 equals tp1" megatron dist_tp1 tp1
case_run "dist_tp2 equals tp2 (TP-merged)" megatron dist_tp2 tp2
case_run "dist_tp2_bf16 equals tp2_bf16 (TP-merged)" megatron dist_tp2_bf16 tp2_bf16
case_run "dist_tp2_optim equals tp2_optim, exp_avg and exp_avg_sq included" megatron dist_tp2_optim tp2_optim --optimizer
finish
