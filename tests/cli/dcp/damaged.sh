# A data file cut short or missing: the error names the file and the key, nothing written.
cp -r "$TESTDATA/dcp" short
head -c 9000 "$TESTDATA/dcp/__1_0.distcp" > short/__1_0.distcp
cp -r "$TESTDATA/dcp" missing
rm missing/__0_0.distcp
for case in short missing; do
  if ckptconv convert -q "$case" out.safetensors 2> err.txt; then echo "$case: convert accepted it"; fi
  cat err.txt
done
ls
