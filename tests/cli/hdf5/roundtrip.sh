# .pt -> .h5 -> .pt gives every tensor back byte for byte, with each compression, and through
# a .h5.zst too; the HDF5 file names its codec and the zstd level it was given.
set -e
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" ref.safetensors
for c in zstd zstd:9 gzip gzip:1 none; do
  ckptconv convert -q --compress "$c" "$TESTDATA/sample/tiny_llama.pt" "m.h5"
  ckptconv convert -q m.h5 back.pt
  ckptconv convert -q back.pt back.safetensors
  cmp back.safetensors ref.safetensors
  ckptconv inspect --json m.h5 | python3 -c '
import json, sys
d = json.load(sys.stdin)
enc = sorted({t["storage"]["encoding"] for t in d["tensors"] if "storage" in t})
print(sys.argv[1], d["format"], len(d["tensors"]), enc)' "$c"
  rm m.h5 back.pt back.safetensors
done
ckptconv convert -q --compress zstd "$TESTDATA/sample/tiny_llama.pt" m.h5.zst
ckptconv convert -q m.h5.zst back.safetensors
cmp back.safetensors ref.safetensors
echo identical
