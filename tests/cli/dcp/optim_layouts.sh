# A dp_reshardable checkpoint of megatron-core (TP2 PP1 DP2, three buckets) to TP1 PP2 at DP1
# (buckets laid out again: --overlap-grad-reduce holds on the first stage only) and back to
# TP2 PP1 DP2: every parameter's master and moments come back, and the buckets of the round
# trip are megatron-core's (their sizes checked against the layout when read again).
d="$TESTDATA/megatron/distopt/a_tp2pp1dp2_buckets"
ckptconv reshard -q "$d/dp_reshardable" pp2 --tp 1 --pp 2 --dp 1 --to torch_dist
ckptconv reshard -q pp2 back --tp 2 --pp 1 --dp 2 --to torch_dist
ckptconv inspect back/iter_0000003 | grep -oE '^optimizer\.distributed\.dp_group_idx_0[^ ]+ [^ ]+\.param +float32 +\[[0-9]+\]' | sed 's/  */ /g'
ckptconv inspect "$d/dp_reshardable/iter_0000003" | grep -oE '^optimizer\.distributed\.dp_group_idx_0[^ ]+ [^ ]+\.param +float32 +\[[0-9]+\]' | sed 's/  */ /g'
for x in back pp2; do
    ckptconv reshard -q $x $x.fully --tp 1 --pp 1 --to torch_dist --optim-format fully_reshardable
    ckptconv convert -q $x.fully/iter_0000003 $x.safetensors
done
ckptconv reshard -q "$d/dp_reshardable" src.fully --tp 1 --pp 1 --to torch_dist --optim-format fully_reshardable
ckptconv convert -q src.fully/iter_0000003 src.safetensors
ckptconv diff src.safetensors pp2.safetensors --quiet && echo "TP1 PP2 DP1: every parameter's state kept"
ckptconv diff src.safetensors back.safetensors --quiet && echo "and back at TP2 PP1 DP2"
