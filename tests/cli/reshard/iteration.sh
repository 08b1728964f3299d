# --iteration reads another iteration directory; the tracker of the output names it.
set -e
cp -r "$TESTDATA/megatron/tp1" in
mv in/iter_0000010 in/iter_0000020
ckptconv reshard in out -q 2>/dev/null || echo "no iteration 10: exit $?"
ckptconv reshard in out --iteration 20 -q
cat out/latest_checkpointed_iteration.txt; echo
ls out
