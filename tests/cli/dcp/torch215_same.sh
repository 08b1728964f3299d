# The fixtures written under torch 2.15 hold the weights of their torch 2.10 twins: every
# command gives the same bytes from either (consolidated, resharded to torch_dist TP1,
# converted to Hugging Face), and the same tensors resharded to legacy TP2 PP2 (whose args
# and rng states come from the source). The torch_dist pair is dist_tp1 (torch 2.10) and
# dist215_tp2 (torch 2.15, TP2: its weights are tp1's, TP-split).
ckptconv convert -q "$TESTDATA/dcp" plain.safetensors
ckptconv convert -q "$TESTDATA/dcp215" plain215.safetensors
cmp plain.safetensors plain215.safetensors && echo "same: plain consolidated"
for d in dist_tp1 dist215_tp2; do
  ckptconv convert -q "$TESTDATA/megatron/$d/iter_0000010" "c-$d.safetensors"
  ckptconv reshard -q "$TESTDATA/megatron/$d" "r-$d" --tp 2 --pp 2 --no-optimizer
  ckptconv reshard -q "$TESTDATA/megatron/$d" "t-$d" --tp 1 --to torch_dist --no-optimizer
  ckptconv convert -q "t-$d/iter_0000010" "t-$d.safetensors"
  ckptconv mcore2hf -q "$TESTDATA/megatron/$d" "h-$d"
done
cmp c-dist_tp1.safetensors c-dist215_tp2.safetensors && echo "same: consolidated"
ckptconv diff -q r-dist_tp1 r-dist215_tp2 && echo "same tensors: resharded to legacy TP2 PP2"
cmp t-dist_tp1.safetensors t-dist215_tp2.safetensors && echo "same: resharded to torch_dist TP1"
diff -r h-dist_tp1 h-dist215_tp2 && echo "same: to Hugging Face"
