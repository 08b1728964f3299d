# hf2paddle: the same rule as hf2mcore, and the same report.
cp -r "$TESTDATA/hf/llama_tiny" in
python3 "$CLI_DIR/add_tensor.py" in model.extra.weight
ckptconv hf2paddle in out --tp 2 2>&1; echo "exit $?"
ckptconv hf2paddle in out --tp 2 --drop model.extra.weight --dry-run --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["dropped"], r["dry_run"], r["tensors"])'
ckptconv hf2paddle in out --tp 2 --drop model.extra.weight -q; echo "exit $?"
ls out
