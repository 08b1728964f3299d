# --max-shard-size in decimal units; the index json as DeepSpeed writes it.
set -e
ckptconv zero-to-fp32 -q --max-shard-size 2KB "$TESTDATA/zero/stage2_fp32_ws2" out
ls out
cmp out/pytorch_model.bin.index.json "$TESTDATA/zero/stage2_fp32_ws2/expected/sharded/pytorch_model.bin.index.json"
ckptconv zero-to-fp32 -q --max-shard-size 1 "$TESTDATA/zero/stage2_fp32_ws2" out2
ls out2 | wc -l
