# Files inside a checkpoint directory may be compressed in place, under their own names: the
# sharded model reads as before, one note per decompressed file.
set -e
cp -r "$TESTDATA/zero/stage3_bf16_ws2_untied/expected/sharded_safetensors" shards
for f in shards/*.safetensors; do zstd -q "$f" -o "$f.tmp" && mv "$f.tmp" "$f"; done
ckptconv convert -q shards one.safetensors
ckptconv convert -q "$TESTDATA/zero/stage3_bf16_ws2_untied/expected/sharded_safetensors" ref.safetensors
cmp one.safetensors ref.safetensors
ckptconv inspect shards | grep -c ': zstd, '
