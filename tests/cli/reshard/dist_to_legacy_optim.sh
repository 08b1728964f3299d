# torch_dist sources to the legacy layout with their optimizer state, as the kind of optimizer
# named: the dp_reshardable save of a real run gives the legacy distrib_optim.pt files of the
# same run tensor for tensor; its fully_reshardable save, as the plain form, the same masters
# and moments by name; a plain torch_dist save, the plain form. Keeping "the source's kind"
# is refused, naming the options.
B="$TESTDATA/megatron/distopt/b_tp2pp2dp1_bf16_tied"
ckptconv reshard -q "$B/dp_reshardable" dist --tp 2 --pp 2 --to-distributed-optimizer
n=0
for f in "$B"/legacy/iter_*/mp_rank_*/*.pt; do
    rel=${f#"$B/legacy/"}
    ckptconv diff -q "$f" "dist/$rel" || echo "differs: $rel"
    n=$((n + 1))
done
echo "dp_reshardable -> legacy distributed: $n rank files"
ckptconv reshard -q "$B/fully_reshardable" plain --tp 1 --pp 1 --to-optimizer plain
ckptconv verify -q "$B/legacy" plain --optimizer --device cpu --tokens 4
echo "fully_reshardable -> legacy plain: exit $?"
ckptconv reshard -q "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/torch_dist" plain_tp2 --tp 2 --to-optimizer plain
ckptconv verify -q "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/torch_dist" plain_tp2 --optimizer --device cpu --tokens 4
echo "torch_dist plain -> legacy plain: exit $?"
ckptconv reshard -q "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/torch_dist" keep --tp 2
echo "exit $?"
