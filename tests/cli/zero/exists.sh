# A non-empty OUTPUT_DIR is refused without --force; with it, same-named files are
# replaced and other files kept.
mkdir out
echo keep > out/README
echo old > out/pytorch_model.bin
ckptconv zero-to-fp32 -q "$TESTDATA/zero/stage1_bf16_ws2" out
echo "exit $?"
cat out/pytorch_model.bin
ckptconv zero-to-fp32 -q --force "$TESTDATA/zero/stage1_bf16_ws2" out
echo "exit $?"
ls -A out
cat out/README
ls -A
