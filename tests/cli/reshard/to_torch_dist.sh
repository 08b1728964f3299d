# --to torch_dist: megatron-core's dist_checkpointing layout, one data file per target rank;
# read back at global shapes. A legacy non-distributed optimizer's state is written with it
# (tests/cli/dcp/optim_plain_legacy.sh); --to names a format.
ckptconv reshard -q "$TESTDATA/megatron/tp2" out --tp 1 --pp 2 --to torch_dist --no-optimizer
(cd out && find . -type f | sort)
ckptconv inspect out/iter_0000010 | sed -n '1,3p'
cp -r "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" opt
ckptconv reshard -q opt written --tp 1 --to torch_dist 2>&1 || echo "exit $?"
ckptconv inspect written/iter_0000003 | grep -c '^optimizer\.state\.exp_avg\.'
ckptconv reshard -q "$TESTDATA/megatron/tp2" bad --to pdparams 2>&1 || echo "exit $?"
ls
