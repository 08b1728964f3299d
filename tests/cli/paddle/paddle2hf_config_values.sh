# paddle2hf writes no nonsense from PaddleNLP's config.json into the Hugging Face config: a
# value out of range, of the wrong type, or not what the tensors hold is refused, naming the
# PaddleNLP config.json and the field; nothing written.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
try() {
    rm -rf in
    cp -r "$TESTDATA/paddlenlp/fp32_tp1" in
    edit in/config.json "$1" "$2"
    ckptconv paddle2hf in out
    echo "exit $?"
    test ! -e out || echo "out written"
}
try max_position_embeddings 1e20
try bos_token_id 1e300
try rms_norm_eps -1
try rope_theta '"x"'
try tie_word_embeddings 1
try intermediate_size 64
try model_type gemma
# a Hugging Face family or RoPE scaling PaddleNLP's LlamaForCausalLM does not have
try architectures '["Qwen2ForCausalLM"]'
try rope_scaling '{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}'
