set -e
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" tiny.safetensors
ckptconv inspect --json tiny.safetensors | python3 -c '
import json, sys
d = json.load(sys.stdin)
names = {t["name"] for t in d["tensors"]}
print(d["format"], len(names), "model/embedding.word_embeddings.weight" in names,
      sorted({t["dtype"] for t in d["tensors"]}))'
