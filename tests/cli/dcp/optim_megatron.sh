# megatron-core's own distributed-optimizer saves (testdata/megatron/distopt: the same training
# state saved as legacy, dp_reshardable and fully_reshardable): read from each form, the
# per-parameter state is the same; Megatron's fully_reshardable save is what we write from its
# dp_reshardable one at the same layout (fully <-> dp, a job of its own); several buckets
# (TP2 DP2) and virtual stages (PP2 VPP2) included, and fp16 with three optimizer instances
# (buffers laid out for DP 1 of DP 3). The fixture whose first bucket has end padding (_gaps):
# its legacy save written as dp_reshardable at its layout reads back as the legacy save, and
# its fully_reshardable save, which megatron-core wrote at the wrong offsets (PR #5077), is
# refused.
d="$TESTDATA/megatron/distopt"
st() { ckptconv convert -q "$1/iter_0000003" "$2.safetensors"; }
ckptconv reshard -q "$d/t210_a_tp2pp1dp2_gaps/legacy" gaps_dp --tp 2 --pp 1 --to torch_dist
for n in a_tp2pp1dp2_buckets c_tp1pp2dp1_vpp2 f_tp1pp1dp3_fp16_inst3 t210_a_tp2pp1dp2_gaps; do
    case $n in t210_*) dp=gaps_dp ;; *) dp="$d/$n/dp_reshardable" ;; esac
    ckptconv reshard -q "$dp" $n.dp --tp 1 --pp 1 --to torch_dist --optim-format fully_reshardable
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
# torch_dist -> legacy at the same layout: each rank's distrib_optim.pt is the one megatron-core
# saved from the same state (bf16 with tied embeddings over PP2; two virtual stages)
for n in b_tp2pp2dp1_bf16_tied c_tp1pp2dp1_vpp2; do
    case $n in b_*) lay="--tp 2 --pp 2" ;; *) lay="--tp 1 --pp 2 --vpp 2" ;; esac
    ckptconv reshard -q "$d/$n/dp_reshardable" $n.tolegacy $lay
    for f in "$d/$n"/legacy/iter_0000003/mp_rank_*/distrib_optim.pt; do
        r=${f#"$d/$n/legacy/"}
        ckptconv diff "$f" $n.tolegacy/$r --quiet && echo "$n $r: equal"
    done
done
