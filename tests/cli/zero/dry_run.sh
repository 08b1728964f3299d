# --dry-run lists every file and tensor and writes nothing.
set -e
ckptconv zero-to-fp32 --dry-run --max-shard-size 2KB "$TESTDATA/zero/stage2_bf16_ws2" out
ls -A
