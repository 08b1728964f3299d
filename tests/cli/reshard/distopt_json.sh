# The --json report of a distributed optimizer's reshard names the DP on both sides; the
# output has a distrib_optim.pt beside every model_optim_rng.pt and records the target DP in
# args (which is where the next reshard reads it).
set -e
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp2_buckets/legacy" out --tp 1 --pp 2 --dp 4 --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["from"]["tp"], d["from"]["pp"], d["from"]["dp"], "->", d["to"]["tp"], d["to"]["pp"], d["to"]["dp"])
print("optimizer", d["optimizer"], "distributed", d["distributed_optimizer"])'
ls out/iter_0000003/*
ckptconv reshard out again --dry-run --json | python3 -c '
import json, sys
print("read back: DP", json.load(sys.stdin)["from"]["dp"])'
