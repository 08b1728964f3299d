# megatron-core's own distributed-optimizer saves (testdata/megatron/distopt: the same training
# state saved as legacy, dp_reshardable and fully_reshardable): read from each form, the
# per-parameter state is the same; Megatron's fully_reshardable save is what we write from its
# dp_reshardable one at the same layout (fully <-> dp, a job of its own); several buckets
# (TP2 DP2) and virtual stages (PP2 VPP2) included. The fixture whose first bucket has end
# padding (_gaps) reads from dp_reshardable and legacy alike, and its fully_reshardable save,
# which megatron-core wrote at the wrong offsets (PR #5077), is refused.
d="$TESTDATA/megatron/distopt"
st() { ckptconv convert -q "$1/iter_0000003" "$2.safetensors"; }
for n in a_tp2pp1dp2_buckets c_tp1pp2dp1_vpp2 t210_a_tp2pp1dp2_gaps; do
    ckptconv reshard -q "$d/$n/dp_reshardable" $n.dp --tp 1 --pp 1 --to torch_dist --optim-format fully_reshardable
    ckptconv reshard -q "$d/$n/legacy" $n.legacy --tp 1 --pp 1 --to torch_dist --optim-format fully_reshardable
    st $n.dp $n.dp; st $n.legacy $n.legacy
    ckptconv diff $n.dp.safetensors $n.legacy.safetensors --quiet && echo "$n: dp_reshardable = legacy"
done
ckptconv reshard -q "$d/a_tp2pp1dp2_buckets/dp_reshardable" same --tp 2 --pp 1 --to torch_dist \
    --optim-format fully_reshardable
st "$d/a_tp2pp1dp2_buckets/fully_reshardable" megatron; st same same
ckptconv diff megatron.safetensors same.safetensors --quiet && echo "dp -> fully at TP2: Megatron's own fully_reshardable"
cp -r "$d/t210_a_tp2pp1dp2_gaps/fully_reshardable" gaps_fully
ckptconv reshard -q gaps_fully bad --tp 1 --to torch_dist 2>&1 || echo "exit $?"
