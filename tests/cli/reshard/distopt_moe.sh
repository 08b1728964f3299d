# A mixture-of-experts model's distributed optimizer (a real megatron-core run, 4 experts at
# EP 2 inside DP 2): its chained optimizer's distrib_optim.pt, [dense, expert] at EP rank 0 and
# [None, expert] at EP rank 1, resharded to another TP/PP/DP at the same EP and back gives every
# rank file back bit for bit; the same layout writes the same tensors. A list that does not fit
# its rank is refused, naming the file and the entry, before anything is written.
set -e
D="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy"
R=iter_0000003
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
    ckptconv reshard -q "$D" there --tp "$1" --pp "$2" --dp "$3"
    ckptconv reshard -q there back --tp 1 --pp 1 --dp 2
    same "$D" back "TP $1 PP $2 DP $3 -> back"
    rm -rf there back
}
trip 1 1 2
trip 2 1 2
trip 1 2 2
trip 2 2 4
set +e
cp -r "$D" swapped
cp "$D/$R/mp_rank_00_000/distrib_optim.pt" swapped/$R/mp_rank_00_001/
cp -r "$D" none_first
cp "$D/$R/mp_rank_00_001/distrib_optim.pt" none_first/$R/mp_rank_00_000/
cp -r "$D" dense_only
cp "$TESTDATA/megatron/distopt/a_tp1pp1dp1/legacy/$R/mp_rank_00/distrib_optim.pt" dense_only/$R/mp_rank_00_001/
for set in swapped none_first dense_only; do
    ckptconv reshard "$set" out --tp 1 --pp 1
    echo "$set: exit $?"
done
test ! -e out && echo "no output"
