# --safe-serialization writes model.safetensors (sharded: model-0000i-of-0000N + index).
set -e
ckptconv zero-to-fp32 -q --safe-serialization "$TESTDATA/zero/stage2_fp32_ws2_untied" out
ckptconv zero-to-fp32 -q --safe_serialization --max_shard_size 2KB "$TESTDATA/zero/stage2_fp32_ws2_untied" out2
ckptconv zero-to-fp32 -q --to safetensors "$TESTDATA/zero/stage2_fp32_ws2_untied" out3
cmp out/model.safetensors out3/model.safetensors
ls out out2
ckptconv inspect out/model.safetensors | head -n 3 | cut -c1-30
