# A few KB that decompress to 64 MiB: refused naming the file once the first MiB is out and
# shows no format's start, the rest never written (ulimit -f kills a run that writes it all
# to $TMPDIR). A safetensors file followed by more data than its header says, streamed or
# with the frame declaring its size, is stopped at the header's size.
mkdir tmp
export TMPDIR="$PWD/tmp"
ulimit -f 8192
{ printf 'X'; head -c 64M /dev/zero; } | zstd -q > bomb.pt.zst
ckptconv inspect bomb.pt.zst
ckptconv convert -q bomb.pt.zst out.safetensors
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" model.safetensors
{ cat model.safetensors; head -c 64M /dev/zero; } | zstd -q > streamed.safetensors.zst
size=$(( $(stat -c %s model.safetensors) + 67108864 ))
{ cat model.safetensors; head -c 64M /dev/zero; } | zstd -q --stream-size=$size > sized.safetensors.zst
ckptconv inspect streamed.safetensors.zst
ckptconv inspect sized.safetensors.zst
ls tmp
