# A data file compressed in place (under its own name) reads as plain, held to what the
# metadata places in it: one followed by 64 MiB more is refused as it is decompressed, the
# rest never written (ulimit -f kills a run that writes it all to $TMPDIR).
mkdir tmp
export TMPDIR="$PWD/tmp"
ulimit -f 8192
cp -r "$TESTDATA/dcp" packed
zstd -q "$TESTDATA/dcp/__1_0.distcp" -o packed/__1_0.distcp -f
ckptconv convert -q packed packed.safetensors && echo "compressed data file: converted"
ckptconv convert -q "$TESTDATA/dcp" plain.safetensors && cmp packed.safetensors plain.safetensors && echo "same as plain"
cp -r "$TESTDATA/dcp" bomb
{ cat "$TESTDATA/dcp/__1_0.distcp"; head -c 64M /dev/zero; } | zstd -q > bomb/__1_0.distcp
ckptconv convert -q bomb bomb.safetensors
ls tmp
