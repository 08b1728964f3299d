# megatron-core 0.13.1's dp_zero_gather_scatter (--no-ckpt-fully-parallel-save): each
# model-parallel rank's legacy distrib_optim.pt dict as the bytes item
# optimizer.distributed.dp_group_idx_M.param_state/shard_0_1, read in place. Its twin legacy/
# (same run, same state): the same ranges listed, the same state verified, and a reshard of
# either to another TP/PP/DP writes the same distrib_optim.pt bytes.
V="$TESTDATA/megatron/distopt/core013_a_tp2pp1dp2_buckets"
Z="$V/dp_zero_gather_scatter"
ckptconv inspect "$Z" | sed -n '/^optimizer state/,$p' >zero.txt
ckptconv inspect "$V/legacy" | sed -n '/^optimizer state/,$p' >legacy.txt
head -1 zero.txt
cmp zero.txt legacy.txt && echo "inspect: the legacy twin's $(($(wc -l <zero.txt) - 3)) ranges"
ckptconv verify --optimizer "$Z" "$V/legacy" -q
echo "verify --optimizer against legacy: exit $?"
for to in "--tp 1 --pp 2 --dp 2" "--tp 1 --dp 1 --ddp-bucket-size none"; do
    rm -rf z l
    # shellcheck disable=SC2086
    ckptconv reshard "$Z" z $to -q && ckptconv reshard "$V/legacy" l $to -q || echo "reshard $to failed"
    n=0
    for f in l/iter_0000003/*/distrib_optim.pt; do
        cmp "$f" "z/${f#l/}" && n=$((n + 1))
    done
    echo "$to: $n distrib_optim.pt equal to the legacy twin's"
    ckptconv verify --optimizer z l -q
    echo "verify --optimizer: exit $?"
done
ckptconv reshard "$Z" dist --to torch_dist --tp 1 -q
echo "-> torch_dist: exit $?"
ckptconv verify --optimizer dist "$V/legacy" -q
echo "verify --optimizer against legacy: exit $?"
