# ZeRO-0: fp32 weights are the module state dict; bf16 ones are refused.
ckptconv zero-to-fp32 "$TESTDATA/zero/stage0_fp32_ws2" out
echo "exit $?"
ckptconv zero-to-fp32 "$TESTDATA/zero/stage0_bf16_ws2" out2
echo "exit $?"
ckptconv zero-to-fp32 --optimizer-states "$TESTDATA/zero/stage0_fp32_ws2" out3
echo "exit $?"
ls
