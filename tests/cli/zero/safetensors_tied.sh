# Tied weights cannot go into safetensors (DeepSpeed fails too): exit 1, nothing left.
ckptconv zero-to-fp32 --safe-serialization "$TESTDATA/zero/stage3_fp32_ws2" out
echo "exit $?"
ls -A
