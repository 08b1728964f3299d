# A Megatron-only flag on a PaddleNLP directory is a usage error, before anything is read.
ckptconv reshard "$TESTDATA/paddlenlp/fp32_tp1" out --tp 2 --vpp 2
