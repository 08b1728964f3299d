# .metadata that names code (torch.load would run os.system) or a data file outside the
# directory: refused, with the reason, by inspect and convert; nothing written.
for case in unsafe_global escaping_path; do
  cp -r "$TESTDATA/bad_dcp/$case" "$case"
  if ckptconv inspect "$case" > /dev/null 2> err.txt; then echo "$case: inspect accepted it"; fi
  cat err.txt
  if ckptconv convert -q "$case" out.safetensors 2> err.txt; then echo "$case: convert accepted it"; fi
  cat err.txt
done
ls
