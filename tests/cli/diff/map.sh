# --map compares A through a rename map: a Hugging Face directory against its hf2mcore
# output (q/k/v and gate/up fused, vocabulary padded). The map's parameters come from what
# the checkpoints state (config.json, Megatron-LM args: padded_vocab_size from the stored
# vocabulary), --param overriding them; the Transformer Engine `_extra_state` entries only
# the Megatron-LM side has hold no weights: counted apart, not a difference.
ckptconv hf2mcore -q "$TESTDATA/hf/llama_tiny" mcore
ckptconv diff "$TESTDATA/hf/llama_tiny" mcore --map hf_llama_megatron | sed "s|$TESTDATA|TESTDATA|"
echo "exit ${PIPESTATUS[0]}"
ckptconv diff "$TESTDATA/hf/llama_tiny" mcore --map hf_llama_megatron --all | grep -c "state only B"
ckptconv diff "$TESTDATA/hf/llama_tiny" mcore --map hf_llama_megatron --param padded_vocab_size=320 | tail -n 2
echo "--param padded_vocab_size=320: exit ${PIPESTATUS[0]}"
# the weights file alone (no config.json): every parameter from the Megatron-LM args
# (heads, query groups, kv_channels, both vocabulary sizes)
ckptconv diff -q "$TESTDATA/hf/llama_tiny/model.safetensors.index.json" mcore --map hf_llama_megatron
echo "parameters from args alone: exit $?"
# either way round: the map renames whichever side holds its source names
ckptconv diff mcore "$TESTDATA/hf/llama_tiny" --map hf_llama_megatron | head -n 2 | sed "s|$TESTDATA|TESTDATA|"
echo "Megatron-LM as A: exit ${PIPESTATUS[0]}"
ckptconv diff mcore "$TESTDATA/hf/llama_tiny" --map megatron_hf_llama | tail -n 2
echo "through the inverse map: exit ${PIPESTATUS[0]}"
ckptconv diff "$TESTDATA/hf/llama_tiny" mcore --map megatron_hf_llama | sed -n '2p;$p'
echo "the inverse map, Hugging Face as A: exit ${PIPESTATUS[0]}"
# tied embeddings: no lm_head on the Hugging Face side, no output_layer on the Megatron-LM side
python3 "$CLI_DIR/tie.py" "$TESTDATA/hf/llama_tiny" tied
ckptconv hf2mcore -q tied tied-mcore
ckptconv diff -q tied tied-mcore --map hf_llama_megatron
echo "tied: exit $?"
ckptconv diff -q tied-mcore tied --map megatron_hf_llama
echo "tied, through the inverse map: exit $?"
# a weight only one side holds is a difference, _extra_state or not
ckptconv diff tied mcore --map hf_llama_megatron | grep -E "^output_layer|tensors:"
echo "tied against untied: exit ${PIPESTATUS[0]}"
# a parameter no side states is a usage error naming it and where it comes from
python3 "$CLI_DIR/st.py" a.safetensors w:F32:1:1
ckptconv diff -q a.safetensors a.safetensors --map hf_llama_megatron
echo "no parameters: exit $?"
ckptconv paddle2hf -q "$TESTDATA/paddlenlp/fp32_tp2" hf
ckptconv diff -q "$TESTDATA/paddlenlp/fp32_tp2" hf --map paddle_llama_hf
echo "PaddleNLP against paddle2hf: exit $?"
ckptconv diff -q "$TESTDATA/paddlenlp/fp32_tp2" hf
echo "without the map: exit $?"
ckptconv diff hf "$TESTDATA/paddlenlp/fp32_tp2" --map paddle_llama_hf | sed -n '2p;$p' | sed "s|$TESTDATA|TESTDATA|"
echo "paddle2hf output against PaddleNLP: exit ${PIPESTATUS[0]}"
