# What a config.json says that no conversion here carries is refused, naming config.json and
# the field (and the known values); nothing written: a RoPE type other than default or llama3,
# a RoPE field of another type, llama3 scaling of another shape than Megatron-LM's, the two
# RoPE descriptions of transformers 4 and 5 disagreeing, Qwen2's per-layer sliding window,
# a field of another family that changes the computation.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
try() {
    rm -rf in
    cp -r "$TESTDATA/hf/$1" in
    shift
    while [ $# -gt 1 ]; do
        edit in/config.json "$1" "$2"
        shift 2
    done
    ckptconv hf2mcore in out
    echo "exit $?"
    test ! -e out || echo "out written"
}
try llama3_tiny rope_scaling/rope_type yarn
try transformers5/llama3_tiny rope_parameters/rope_type longrope
try llama3_tiny rope_scaling/beta_fast 32
try llama3_tiny rope_scaling/low_freq_factor 2.0
try llama3_tiny rope_scaling/original_max_position_embeddings --delete
try llama3_tiny rope_parameters '{"rope_type": "default", "rope_theta": 500000.0}'
try qwen2_tiny use_sliding_window true
try qwen2_tiny layer_types '["full_attention", "sliding_attention"]'
try mistral_tiny partial_rotary_factor 0.5
try qwen2_tiny num_experts 8
