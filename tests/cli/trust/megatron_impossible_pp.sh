# Pipeline layouts the 4 layers do not fill evenly are refused, saying which rule fails;
# nothing is written.
ckptconv reshard "$TESTDATA/megatron/tp1" out --pp 8
echo "more stages than layers: exit $?"
ckptconv reshard "$TESTDATA/megatron/tp1" out --pp 3
echo "uneven stages: exit $?"
ckptconv reshard "$TESTDATA/megatron/pp2_vpp2" out --pp 2 --vpp 4
echo "uneven chunks: exit $?"
for d in dist_tp1 dist215_tp2; do
  ckptconv reshard "$TESTDATA/megatron/$d" out --pp 3 --to torch_dist --no-optimizer
  echo "$d: exit $?"
done
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" out --pp 3
echo "hf2mcore: exit $?"
test ! -e out && echo "no output"
