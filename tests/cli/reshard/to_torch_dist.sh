# --to torch_dist: megatron-core's dist_checkpointing layout, one data file per target rank;
# read back at global shapes. A legacy non-distributed optimizer is refused without --no-optimizer; --to names a
# format.
ckptconv reshard -q "$TESTDATA/megatron/tp2" out --tp 1 --pp 2 --to torch_dist --no-optimizer
(cd out && find . -type f | sort)
ckptconv inspect out/iter_0000010 | sed -n '1,3p'
cp -r "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" opt
ckptconv reshard -q opt refused --tp 1 --to torch_dist 2>&1 || echo "exit $?"
ckptconv reshard -q "$TESTDATA/megatron/tp2" bad --to pdparams 2>&1 || echo "exit $?"
ls
