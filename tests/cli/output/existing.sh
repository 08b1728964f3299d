# An existing output without --force, an output that is a directory where a file is
# written (or a file where a directory is), and a format nobody knows are usage errors (2),
# for every command, and leave what is there as it was.
T="$TESTDATA/sample/tiny_llama.pt"
echo keep > out.pt
mkdir dir full
echo keep > full/file
ckptconv convert "$T" out.pt
echo "exit $?"
ckptconv convert "$T" dir --to pt --force
echo "exit $?"
ckptconv convert "$T" dir/ --to pt
echo "exit $?"
ckptconv convert "$T" x.pt --to x
echo "exit $?"
ckptconv inspect "$T" --format x
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp2" full --tp 1 -q
echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/tp2" out.pt --tp 1 -q --force
echo "exit $?"
ckptconv zero-to-fp32 "$TESTDATA/zero/stage1_bf16_ws2" full -q
echo "exit $?"
ckptconv zero-to-fp32 "$TESTDATA/zero/stage1_bf16_ws2" out.pt -q
echo "exit $?"
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" full -q
echo "exit $?"
ckptconv paddle2hf "$TESTDATA/paddlenlp/fp32_tp2" full -q
echo "exit $?"
ckptconv pd2te "$TESTDATA/paddlenlp/fp32_tp2" out.pt -q
echo "exit $?"
cat out.pt
ls -A . dir full
