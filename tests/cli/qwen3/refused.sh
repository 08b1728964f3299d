# What Qwen3 configs Megatron's args cannot say is refused, naming the file and the field:
# a sliding window (on the layers past max_window_layers), q/k/v/o biases (attention_bias).
edit_json() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
src="$TESTDATA/hf/transformers5/qwen3_tiny"
for change in "use_sliding_window true" "attention_bias true"; do
    rm -rf in && cp -r "$src" in
    # shellcheck disable=SC2086
    edit_json in/config.json $change
    ckptconv hf2mcore in mc --tp 2 -q
    echo "$change: exit $?"
done
