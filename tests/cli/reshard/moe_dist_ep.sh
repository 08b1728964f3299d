# torch_dist at another EP with the distributed optimizer's state (the 4-expert EP 2 fixture):
# the fully_reshardable form keeps each parameter's state whole in items that do not depend on
# the EP (the experts stacked at their global index), so only common.pt's optimizer changes
# (EP 1: one optimizer; EP > 1: the chained {0: dense, 1: expert}); read back to the legacy
# layout it is the state of the legacy reshard to that EP (megatron-core 0.16.1 loads these
# outputs at EP 1 and EP 4 and saves oracle_moe.json's files: testdata/gen/load_ours_moe_ep.log).
# The forms that do depend on the EP (dp_reshardable's buckets) and the non-distributed
# optimizer of a MoE model are refused before anything is written.
set -e
D="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy"
R=iter_0000003
ckptconv reshard -q "$D" td2 --tp 1 --pp 1 --to torch_dist --optim-format fully_reshardable
for t in "1 2" "4 4"; do
    # shellcheck disable=SC2086
    set -- $t
    ckptconv reshard -q "$D" "td$1" --tp 1 --pp 1 --ep "$1" --dp "$2" --to torch_dist --optim-format fully_reshardable
    for f in td2/$R/*.distcp; do cmp "$f" "td$1/${f#td2/}"; done
    ckptconv reshard -q "td$1" "legacy$1" --tp 1 --pp 1 --dp "$2"
    ckptconv reshard -q "$D" "direct$1" --tp 1 --pp 1 --ep "$1" --dp "$2"
    for f in "direct$1"/$R/mp_rank_*/*.pt; do ckptconv diff -q "$f" "legacy$1/${f#"direct$1"/}"; done
    echo "EP $1: EP 2's items; back to legacy: $(ls "legacy$1/$R" | tr '\n' ' ')with the state of the direct reshard"
done
set +e
cp -r "$D" src
ckptconv reshard src out --tp 1 --pp 1 --ep 1 --to torch_dist
echo "dp_reshardable at EP 1: exit $?"
ckptconv reshard -q "$D" plain --tp 1 --pp 1 --to-optimizer plain
ckptconv reshard plain out --tp 1 --pp 1 --to torch_dist
echo "non-distributed: exit $?"
test ! -e out && echo "nothing written"
