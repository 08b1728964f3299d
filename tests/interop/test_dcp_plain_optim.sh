#!/usr/bin/env bash
# A legacy checkpoint of Megatron's non-distributed optimizer written as torch_dist with its
# state (reshard --to torch_dist): common.pt against megatron-core 0.16.1's own torch_dist save
# of the same run (testdata/megatron/distopt/a_tp2pp1dp1_plain/torch_dist), read by torch:
# every entry but args equal, in the same key order, to the tensors' bytes (the optimizer's
# param groups without 'params' and its common_step, the scheduler, the iteration, the
# FLOPs count, content_metadata). The items themselves are compared by
# tests/cli/dcp/optim_plain_legacy.sh.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch

common_equal() {
    local src="$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain"
    ckpt reshard -q "$src/legacy" "$WORK/plain" --to torch_dist
    "$TORCH_PYTHON" - "$TESTDATA/gen" "$src/torch_dist/iter_0000003/common.pt" \
        "$WORK/plain/iter_0000003/common.pt" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import distopt_hashes as dh

def order(v):
    """Key order of every dict, tensors as records."""
    if isinstance(v, dict):
        return [[dh.key_str(k), order(x)] for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return [order(x) for x in v]
    return dh.plain(v)

theirs, ours = (dh.load(p) for p in sys.argv[2:4])
assert list(theirs) == list(ours), (list(theirs), list(ours))
for k in theirs:
    if k != "args" and order(theirs[k]) != order(ours[k]):
        sys.exit(f"common.pt[{k!r}]:\n  megatron-core {order(theirs[k])}\n  ours          {order(ours[k])}")
print("common.pt: every entry but args equal to megatron-core's")
PY
}

case_run "legacy plain optimizer -> torch_dist: common.pt is megatron-core's own" common_equal
finish
