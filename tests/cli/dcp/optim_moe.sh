# A mixture-of-experts model's chained optimizer (dense + expert DistributedOptimizer) in
# megatron-core 0.16.1's torch_dist dp_reshardable form (items "chained_<i>.optimizer.
# distributed.dp_group_idx_<g>...", expert grad buffers per EP rank), read and written at its
# EP: in the legacy layout each rank's distrib_optim.pt ([dense, expert] / [None, expert]) and
# model_optim_rng.pt are those megatron-core saved from the same state, tensor for tensor;
# legacy -> torch_dist (both forms, other TP/PP) -> legacy gives back the same bytes.
d="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2"
ckptconv reshard -q "$d/dp_reshardable" legacy --tp 1 --pp 1
for f in "$d"/legacy/iter_0000003/mp_rank_*/*.pt; do
    r=${f#"$d/legacy/"}
    ckptconv diff "$f" legacy/$r --quiet && echo "$r: equal"
done
ckptconv reshard -q "$d/legacy" lg --tp 1 --pp 1
ckptconv reshard -q lg td_dp --tp 2 --pp 1 --to torch_dist
ckptconv reshard -q td_dp td_fully --tp 1 --pp 2 --to torch_dist --optim-format fully_reshardable
ckptconv reshard -q td_fully td_dp2 --tp 1 --pp 1 --to torch_dist --optim-format dp_reshardable
ckptconv reshard -q td_dp2 back --tp 1 --pp 1
for f in lg/iter_0000003/mp_rank_*/distrib_optim.pt; do
    r=${f#lg/}
    cmp "$f" back/$r && echo "legacy -> torch_dist TP 2, PP 2, TP 1 -> legacy $r: same bytes"
done
ls td_dp/iter_0000003 td_fully/iter_0000003
# the file's item order is not the model's: megatron-core 0.13 lists output_layer before
# decoder.final_layernorm, and the grad buffer follows named_parameters() all the same
cp -r "$d/dp_reshardable" reordered
python3 "$CLI_DIR/reorder_items.py" reordered/iter_0000003/.metadata decoder.final_layernorm.weight output_layer.weight
ckptconv reshard -q reordered reordered_legacy --tp 1
ckptconv diff "$d/legacy/iter_0000003/mp_rank_00_000/distrib_optim.pt" \
    reordered_legacy/iter_0000003/mp_rank_00_000/distrib_optim.pt --quiet && echo "items in another order: equal"
# the files must fit their args: a missing expert bucket, an EP the items do not have
cp -r "$d/dp_reshardable" nobucket
python3 - nobucket/iter_0000003/.metadata <<'PY'
import sys
p = sys.argv[1]
b = open(p, 'rb').read()
old = b'chained_1.optimizer.distributed.dp_group_idx_1.gbuf_idx_0.dtype_(torch.float32, torch.float32).bucket_idx_0.exp_avg_sq'
assert old in b
open(p, 'wb').write(b.replace(old, old[:-2] + b'xx'))
PY
ckptconv reshard -q nobucket out1 --tp 1 2>&1 || echo "exit $?"
cp -r "$d/dp_reshardable" ep4
python3 "$CLI_DIR/set_args.py" ep4/iter_0000003/common.pt expert_model_parallel_size=4
ckptconv reshard -q ep4 out2 --tp 1 2>&1 || echo "exit $?"
# a target DP the experts of its EP do not fit is refused
cp -r "$d/legacy" moe_legacy
ckptconv reshard -q moe_legacy dp1 --tp 1 --dp 1 --to torch_dist 2>&1 || echo "exit $?"
ckptconv reshard -q moe_legacy dp1 --tp 1 --dp 1 2>&1 || echo "exit $?"
