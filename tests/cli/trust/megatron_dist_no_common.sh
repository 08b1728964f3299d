# A torch_dist iteration without common.pt (where megatron-core keeps args): refused, naming
# the directory and the missing file.
cp -r "$TESTDATA/megatron/dist_tp2" dist
rm dist/iter_0000010/common.pt
ckptconv reshard dist out --tp 1 --no-optimizer
echo "exit $?"
ckptconv inspect dist
echo "exit $?"
test ! -e out && echo "no output"
