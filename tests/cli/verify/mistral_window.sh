# Mistral's sliding window on both sides: config.json's sliding_window 4 and the window_size
# (3, 0) hf2mcore writes into the args; a side that ran full attention would fail every layer
# (verify runs 64 tokens).
for v in "" transformers5/; do
    ckptconv hf2mcore "$TESTDATA/hf/${v}mistral_tiny" m -q --tp 2 --pp 2 --transformer-impl local
    ckptconv verify "$TESTDATA/hf/${v}mistral_tiny" m --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["pass"], r["tokens"], [(e["name"], e["pass"]) for e in r["layers"]])'
    rm -rf m
done
