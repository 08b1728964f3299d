# A distributed optimizer's state (distrib_optim.pt of real megatron-core runs: buffers of
# several buckets at TP 2 DP 2 (torch 2.15 and 2.10), PP 2 at DP 2, bf16 with tied embeddings
# at TP 2 x PP 2, virtual pipeline chunks)
# resharded to another TP/PP/DP and back: every tensor of every rank file comes back bit for
# bit (fp32 masters and both Adam moments in distrib_optim.pt, the model in
# model_optim_rng.pt), so nothing of the state is lost or moved on the way.
set -e
D="$TESTDATA/megatron/distopt"
same() {
    n=0
    for f in "$1"/iter_*/mp_rank_*/*.pt; do
        rel=${f#"$1"/}
        ckptconv diff -q "$f" "$2/$rel" || { echo "differs: $rel"; return 1; }
        n=$((n + 1))
    done
    echo "$3: $n rank files identical"
}
trip() {
    ckptconv reshard -q "$D/$1/legacy" there --tp "$2" --pp "$3" --vpp "$4" --dp "$5"
    ckptconv reshard -q there back --tp "$6" --pp "$7" --vpp "$8" --dp "$9"
    same "$D/$1/legacy" back "$1 -> TP $2 PP $3 VPP $4 DP $5 -> back"
    rm -rf there back
}
#                           there        back
trip a_tp2pp1dp2_buckets    1 1 1 1      2 1 1 2
trip a_tp2pp1dp2_buckets    1 2 1 3      2 1 1 2
trip a_tp2pp1dp2_buckets    4 1 1 1      2 1 1 2
trip a_tp1pp1dp1            2 2 1 2      1 1 1 1
trip a_tp1pp2dp2            2 1 1 4      1 2 1 2
trip b_tp2pp2dp1_bf16_tied  1 1 1 2      2 2 1 1
trip b_tp2pp2dp1_bf16_tied  2 1 1 1      2 2 1 1
trip c_tp1pp2dp1_vpp2       1 1 1 1      1 2 2 1
trip c_tp1pp2dp1_vpp2       2 2 1 2      1 2 2 1
trip t210_a_tp2pp1dp2_gaps  1 2 1 1      2 1 1 2
