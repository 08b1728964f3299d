# --to-optimizer plain writes the non-distributed optimizer's state from the per-parameter
# form (read here from a plain source): every rank file equal, tensor for tensor, to the
# reshard that keeps the source's kind, and its masters and moments equal to the input's by name.
ckptconv reshard "$TESTDATA/megatron/tp2pp2_bf16_optim" keep --tp 1 --pp 2 -q
ckptconv reshard "$TESTDATA/megatron/tp2pp2_bf16_optim" plain --tp 1 --pp 2 --to-optimizer plain
echo "exit $?"
for f in $(cd keep && find . -name model_optim_rng.pt | sort); do
    ckptconv diff "keep/$f" "plain/$f" | tail -1
done
ckptconv verify "$TESTDATA/megatron/tp2pp2_bf16_optim" plain --optimizer --device cpu --tokens 4 -q
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" fp32 --tp 1 --to-optimizer plain -q
ckptconv verify "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" fp32 --optimizer --device cpu --tokens 4 -q
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" fp32.json --tp 1 --to-optimizer plain --dry-run --json | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["optimizer"], o["optimizer_kind"])'
# Each parameter's step is a tensor of its own storage: torch's Adam adds 1 to it in place,
# so steps sharing one storage would count every parameter's update.
f=$(find plain -name model_optim_rng.pt | sort | head -n 1)
ckptconv inspect "$f" --json | python3 -c '
import json, sys, zipfile
steps = [t["name"] for t in json.load(sys.stdin)["tensors"] if t["name"].endswith("/step")]
records = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if "/data/" in n]
print(len(steps) > 1, len(records) == len(json.load(open(sys.argv[2]))["tensors"]))' "$f" <(ckptconv inspect "$f" --json)
