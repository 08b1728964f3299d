# --compress is for HDF5 output, its codec and level are checked, and nothing is written.
for args in "--compress zstd x.safetensors" "--compress lz4 x.h5" "--compress zstd:0 x.h5" \
            "--compress gzip:10 x.h5" "--compress-level 23 x.zst.pt" "--to h5 --compress zstd:abc x"; do
  # shellcheck disable=SC2086
  ckptconv convert "$TESTDATA/sample/tiny_llama.pt" $args
  echo "exit $?"
done
ls
