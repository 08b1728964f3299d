# Target layouts megatron-core cannot build a model for are refused, saying which rule fails;
# nothing is written. The fixtures have 4 attention heads, 2 query groups, ffn 96, 4 layers.
ckptconv reshard "$TESTDATA/megatron/tp2" out --tp 8
echo "legacy: exit $?"
ckptconv reshard "$TESTDATA/megatron/tp2" out --tp 8 --to torch_dist --no-optimizer
echo "to torch_dist: exit $?"
for d in dist_tp1 dist215_tp2; do
  ckptconv reshard "$TESTDATA/megatron/$d" out --tp 8 --no-optimizer
  echo "from $d: exit $?"
done
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" out --tp 8
echo "hf2mcore: exit $?"
ckptconv reshard "$TESTDATA/megatron/tp2" out --tp 4 --padded-vocab-size 254
echo "vocabulary: exit $?"
test ! -e out && echo "no output"
# fewer query groups (2) than ranks (4) is megatron-core's GQA replication: allowed
ckptconv reshard "$TESTDATA/megatron/tp2" ok --tp 4 -q
echo "2 groups over TP 4: exit $?"
