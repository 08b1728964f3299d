# --map compares A through a rename map: a Hugging Face directory against its hf2mcore
# output (q/k/v and gate/up fused, vocabulary padded: the map's parameters from A's
# config.json and --param), a PaddleNLP TP2 directory against its paddle2hf output.
ckptconv hf2mcore -q "$TESTDATA/hf/llama_tiny" mcore
ckptconv diff "$TESTDATA/hf/llama_tiny" mcore --map hf_llama_megatron --param padded_vocab_size=256 \
    --exclude '*._extra_state' | sed "s|$TESTDATA|TESTDATA|"
echo "exit ${PIPESTATUS[0]}"
ckptconv diff "$TESTDATA/hf/llama_tiny" mcore --map hf_llama_megatron --param padded_vocab_size=256 | tail -n 2
echo "with _extra_state: exit ${PIPESTATUS[0]}"
ckptconv diff -q "$TESTDATA/hf/llama_tiny" mcore --map hf_llama_megatron
echo "no padded_vocab_size: exit $?"
ckptconv paddle2hf -q "$TESTDATA/paddlenlp/fp32_tp2" hf
ckptconv diff -q "$TESTDATA/paddlenlp/fp32_tp2" hf --map paddle_llama_hf
echo "PaddleNLP against paddle2hf: exit $?"
ckptconv diff -q "$TESTDATA/paddlenlp/fp32_tp2" hf
echo "without the map: exit $?"
