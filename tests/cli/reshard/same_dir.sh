# The output may not be the input nor inside it: nothing is written.
cp -r "$TESTDATA/megatron/tp1" in
ckptconv reshard in in --tp 2 --force
echo "exit $?"
ckptconv reshard in in/tp2 --tp 2
echo "exit $?"
ls in
