# BF16_Optimizer checkpoints, which DeepSpeed's script refuses, convert with a note.
set -e
ckptconv zero-to-fp32 "$TESTDATA/zero/bf16_optimizer_ws2" out
ls out
