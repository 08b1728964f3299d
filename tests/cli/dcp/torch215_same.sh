# The fixtures written under torch 2.15 hold the weights of their torch 2.10 twins: every
# command gives the same bytes from either (consolidated, resharded to legacy TP2 PP2 and to
# torch_dist TP1, converted to Hugging Face).
for g in "" 215; do
  ckptconv convert -q "$TESTDATA/dcp$g" "plain$g.safetensors"
  for n in tp1 tp2; do
    d="$TESTDATA/megatron/dist${g}_$n"
    ckptconv convert -q "$d/iter_0000010" "c$g-$n.safetensors"
    ckptconv reshard -q "$d" "r$g-$n" --tp 2 --pp 2 --no-optimizer
    ckptconv reshard -q "$d" "t$g-$n" --tp 1 --to torch_dist --no-optimizer
    ckptconv convert -q "t$g-$n/iter_0000010" "t$g-$n.safetensors"
    ckptconv mcore2hf -q "$d" "h$g-$n"
  done
done
cmp plain.safetensors plain215.safetensors && echo "same: plain consolidated"
for n in tp1 tp2; do
  cmp "c-$n.safetensors" "c215-$n.safetensors" && echo "same: dist_$n consolidated"
  diff -r "r-$n" "r215-$n" && echo "same: dist_$n resharded to legacy TP2 PP2"
  cmp "t-$n.safetensors" "t215-$n.safetensors" && echo "same: dist_$n resharded to torch_dist TP1"
  diff -r "h-$n" "h215-$n" && echo "same: dist_$n to Hugging Face"
done
