# Rank directories that are not the TP x PP x EP their args name: a gap in the grid, a last
# pipeline stage gone, a rank too many, a distributed optimizer's part in one rank only.
# Each is refused, naming the directory; nothing is written.
cp -r "$TESTDATA/megatron/tp2pp2" gap
rm -r gap/iter_0000010/mp_rank_01_001
cp -r "$TESTDATA/megatron/pp2" stage
rm -r stage/iter_0000010/mp_rank_00_001
cp -r "$TESTDATA/megatron/tp2" extra
cp -r extra/iter_0000010/mp_rank_01 extra/iter_0000010/mp_rank_02
cp -r "$TESTDATA/megatron/tp2" distrib
touch distrib/iter_0000010/mp_rank_01/distrib_optim.pt
for set in gap stage extra distrib; do
    ckptconv reshard "$set" out --tp 1 --pp 1 --no-optimizer
    echo "$set: exit $?"
done
test ! -e out && echo "no output"
