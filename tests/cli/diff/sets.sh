# Checkpoints of many files are compared as the model their ranks make: a Megatron-LM TP2
# checkpoint equals its TP1 reshard and its torch_dist twin (its root or its iteration
# directory; a plain Distributed Checkpoint stays what its format reads), a PaddleNLP TP2 directory its
# TP1 reshard, a ZeRO directory its zero-to-fp32 output.
ckptconv reshard -q "$TESTDATA/megatron/tp2" tp1 --tp 1
ckptconv diff "$TESTDATA/megatron/tp2" tp1 | sed "s|$TESTDATA|TESTDATA|"
echo "exit ${PIPESTATUS[0]}"
ckptconv diff -q "$TESTDATA/megatron/dist215_tp2" "$TESTDATA/megatron/tp2"
echo "torch_dist against torch: exit $?"
ckptconv diff -q "$TESTDATA/megatron/dist215_tp2/iter_0000010" "$TESTDATA/megatron/tp2"
echo "torch_dist iteration directory against torch: exit $?"
ckptconv diff "$TESTDATA/dcp" "$TESTDATA/dcp" | head -n 1 | sed "s|$TESTDATA|TESTDATA|"
echo "a plain Distributed Checkpoint: exit ${PIPESTATUS[0]}"
ckptconv reshard -q "$TESTDATA/paddlenlp/fp32_tp2" ptp1 --tp 1
ckptconv diff -q "$TESTDATA/paddlenlp/fp32_tp2" ptp1
echo "PaddleNLP TP2 against TP1: exit $?"
ckptconv zero-to-fp32 -q "$TESTDATA/zero/stage2_fp32_ws2" zero.safetensors
ckptconv diff -q "$TESTDATA/zero/stage2_fp32_ws2" zero.safetensors
echo "ZeRO against zero-to-fp32: exit $?"
