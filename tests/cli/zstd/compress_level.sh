# --compress-level reaches zstd: level 19 makes a smaller file than level 1, both exact.
set -e
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" plain.safetensors
ckptconv convert -q --compress-level 1 "$TESTDATA/sample/tiny_llama.pt" l1.safetensors.zst
ckptconv convert -q --compress-level 19 "$TESTDATA/sample/tiny_llama.pt" l19.safetensors.zst
zstd -d -q -c l1.safetensors.zst | cmp - plain.safetensors
zstd -d -q -c l19.safetensors.zst | cmp - plain.safetensors
if [ "$(stat -c %s l19.safetensors.zst)" -lt "$(stat -c %s l1.safetensors.zst)" ]; then echo smaller; fi
