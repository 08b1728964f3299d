# The plan of a size-sharded checkpoint: q_proj of layer 1 ends the first file, k/v start the
# second; the fused tensor goes to the first. Nothing is written.
ckptconv pd2te --dry-run "$TESTDATA/llama/fp32_sharded" out
status=$?
ls -A
exit $status
