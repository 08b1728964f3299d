# A mixture-of-experts model's chained optimizer (dense + expert DistributedOptimizer) in
# megatron-core 0.16.1's torch_dist dp_reshardable form (items "chained_<i>.optimizer.
# distributed.dp_group_idx_<g>...", expert grad buffers per EP rank), read and written in the
# legacy layout at its EP: each rank's distrib_optim.pt ([dense, expert] / [None, expert]) and
# model_optim_rng.pt are those megatron-core saved from the same state, tensor for tensor.
d="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2"
ckptconv reshard -q "$d/dp_reshardable" legacy --tp 1 --pp 1
for f in "$d"/legacy/iter_0000003/mp_rank_*/*.pt; do
    r=${f#"$d/legacy/"}
    ckptconv diff "$f" legacy/$r --quiet && echo "$r: equal"
done
# the same state at TP 2 and PP 2 (EP kept)
ckptconv reshard -q "$d/dp_reshardable" tp2 --tp 2 --pp 1
ckptconv reshard -q tp2 back --tp 1 --pp 1
for f in "$d"/legacy/iter_0000003/mp_rank_*/distrib_optim.pt; do
    r=${f#"$d/legacy/"}
    ckptconv diff "$f" back/$r --quiet && echo "TP 2 and back $r: equal"
done
# torch_dist targets of a MoE model are not written yet
cp -r "$d/dp_reshardable" moe_dp
ckptconv reshard -q moe_dp td --tp 1 --to torch_dist 2>&1 || echo "exit $?"
