# A .metadata cut short (empty, inside its first frame, further on) is named as truncated or
# corrupt, by inspect and convert alike, whether the directory or the file itself is given;
# nothing is written.
for n in 0 5 100; do
  cp -r "$TESTDATA/dcp" cut$n
  head -c $n "$TESTDATA/dcp/.metadata" > cut$n/.metadata
  ckptconv inspect cut$n
  ckptconv convert -q cut$n out.safetensors
  ckptconv inspect cut$n/.metadata
done
ckptconv inspect "$TESTDATA/dcp/.metadata" | sed -n 2p
ls
