# What a Gemma 3 config.json says that no conversion here carries is refused, naming
# config.json and the field; nothing written: the vision-language gemma3 (its text model is
# gemma3_text), logit soft-capping, bidirectional attention, a RoPE scaling other than linear
# (yarn, in transformers 5's and 4's spelling), a linear factor that is not a positive number,
# scaling on the sliding layers, another activation.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
src="$TESTDATA/hf/transformers5/gemma3_tiny"
try() {
    rm -rf in out
    cp -r "$src" in
    while [ $# -gt 1 ]; do
        edit in/config.json "$1" "$2"
        shift 2
    done
    ckptconv hf2mcore in out
    echo "exit $?"
    test ! -e out || echo "out written"
}
try model_type gemma3 architectures '["Gemma3ForConditionalGeneration"]'
try final_logit_softcapping 30.0
try attn_logit_softcapping 50.0
try use_bidirectional_attention true
try rope_parameters/full_attention '{"rope_type": "yarn", "factor": 8.0, "rope_theta": 1000000.0}'
try rope_parameters/full_attention '{"rope_type": "linear", "factor": 0, "rope_theta": 1000000.0}'
try rope_parameters/sliding_attention '{"rope_type": "linear", "factor": 8.0, "rope_theta": 10000.0}'
try hidden_activation gelu
src="$TESTDATA/hf/gemma3_linear_tiny"
try rope_scaling '{"rope_type": "yarn", "factor": 8.0}'
try rope_scaling '{"rope_type": "linear", "factor": -8.0}'
try rope_scaling/factor '"8"'
