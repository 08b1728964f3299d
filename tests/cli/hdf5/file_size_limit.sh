# A file size limit (ulimit -f, in KiB) reached while libhdf5 writes chunks, while it extends
# the file, or at its last flush: exit 1 naming the output, never a crash in libhdf5's clean-up
# at exit (it cannot close a file whose writes failed), and no temporary left.
for limit in 1 200 723; do
  bash -c 'ulimit -f "$1"; exec ckptconv convert "$2" out.h5 -q' _ "$limit" "$TESTDATA/torch/big_names.pt" 2> err.txt
  echo "limit $limit: exit $?"
  grep -q '^ckptconv convert: error: out.h5: .*File too large$' err.txt || cat err.txt
done
rm err.txt
ls -A
