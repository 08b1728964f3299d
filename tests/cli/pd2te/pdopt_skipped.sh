ckptconv pd2te "$TESTDATA/llama/fp32_tp1" out
status=$?
ls -A out
exit $status
