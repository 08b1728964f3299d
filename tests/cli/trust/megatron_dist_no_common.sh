# A torch_dist iteration without common.pt (where megatron-core keeps args), as torch 2.10 and
# torch 2.15 write it: refused, naming the directory and the missing file.
for g in "" 215; do
  [ -z "$g" ] && src=dist_tp1 || src=dist215_tp2
  cp -r "$TESTDATA/megatron/$src" "dist$g"
  rm "dist$g/iter_0000010/common.pt"
  ckptconv reshard "dist$g" "out$g" --tp 1 --no-optimizer
  echo "exit $?"
  ckptconv inspect "dist$g"
  echo "exit $?"
  test ! -e "out$g" && echo "no output"
done
