# A .zst output is the plain output, compressed: `zstd -d` gives it back byte for byte.
set -e
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" plain.safetensors
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" out.safetensors.zst
zstd -d -q -c out.safetensors.zst | cmp - plain.safetensors
echo identical
ls
