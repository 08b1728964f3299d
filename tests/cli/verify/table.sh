# A TP1 checkpoint against megatron-core's own TP2 of it: every layer passes, run as ranks.
ckptconv verify "$TESTDATA/megatron/tp1" "$TESTDATA/megatron/tp2" --device cpu --tokens 8 --threads 1
