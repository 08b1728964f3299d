# DeepSpeed's default: one pytorch_model.bin, float32, buffers first, tied name last.
set -e
ckptconv zero-to-fp32 "$TESTDATA/zero/stage2_bf16_ws2" out
ls -A out
ckptconv inspect out/pytorch_model.bin | sed -n '/^name/,/^$/p'
