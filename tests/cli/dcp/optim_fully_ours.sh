# A fully_reshardable save whose grad buffers have padded inner buckets is read when its content
# is right (every parameter megatron-core before PR #5077 would have moved has its weight as
# saved master): ckptconv's own, from a_tp2pp1dp2_buckets at TP 1 (5 buckets, the embedding
# at 2112 of the padded buffer, 2368 of the unpadded one) and from the _gaps fixture, reshards
# back to the source's layout with every distrib_optim.pt tensor equal to megatron-core's own,
# and verify --optimizer finds the state equal. Megatron's own defective save of _gaps stays
# refused (optim_megatron.sh).
d="$TESTDATA/megatron/distopt"
for n in a_tp2pp1dp2_buckets t210_a_tp2pp1dp2_gaps; do
    ckptconv reshard -q "$d/$n/legacy" $n.fully --tp 1 --to torch_dist --optim-format fully_reshardable
    ckptconv reshard -q $n.fully $n.back --tp 2 --to torch
    for f in "$d/$n"/legacy/iter_0000003/mp_rank_*/distrib_optim.pt; do
        r=${f#"$d/$n/legacy/"}
        ckptconv diff "$f" $n.back/$r --quiet && echo "$n $r: equal"
    done
    ckptconv verify "$d/$n/legacy" $n.fully --optimizer 2>&1 | tail -1
done
