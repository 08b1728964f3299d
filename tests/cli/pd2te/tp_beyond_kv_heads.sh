# pd2te --tp 4 of a model with 2 KV heads: PaddleNLP would keep k/v whole on every rank, which
# Transformer Engine's fused layernorm_qkv cannot hold; the refusal says so and what to choose.
ckptconv pd2te "$TESTDATA/paddlenlp/fp32_tp2" out --tp 4
status=$?
test ! -e out || echo "out was written"
exit $status
