# "model.safetensors.zst" is named for what it holds: safetensors bids on it and converts back
# to the same tensors; the output name's ".zst" picks the format under it too.
set -e
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" model.safetensors
zstd -q --long=31 model.safetensors -o model.safetensors.zst
ckptconv inspect --json model.safetensors.zst | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["format"], len(d["tensors"]))'
ckptconv convert -q model.safetensors.zst again.safetensors
cmp again.safetensors model.safetensors
echo identical
