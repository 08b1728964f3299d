# --exclude-frozen-parameters (and DeepSpeed's spelling) drops pos and fc2.bias.
set -e
ckptconv zero-to-fp32 -q --exclude-frozen-parameters "$TESTDATA/zero/stage3_bf16_ws2" out
ckptconv zero-to-fp32 -q --exclude_frozen_parameters "$TESTDATA/zero/stage3_bf16_ws2" out2
cmp out/pytorch_model.bin out2/pytorch_model.bin
ckptconv inspect out/pytorch_model.bin | sed -n '/^name/,/^$/p' | cut -c1-16
