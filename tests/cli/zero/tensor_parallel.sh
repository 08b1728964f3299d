# Two model-parallel ranks: one consolidated output per rank in OUTPUT_DIR/mp_rank_NN/.
set -e
ckptconv zero-to-fp32 -q --max-shard-size 4KB "$TESTDATA/zero/tp2_stage3_bf16_ws2" out
find out -type f | sort
