# What a GPT-2 config.json says that Megatron-LM's GPT model does not compute is refused,
# naming the field and why, and so is one that does not describe its weights; nothing written.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
try() {
    rm -rf in out
    cp -r "$TESTDATA/hf/gpt2_tiny" in
    edit in/config.json "$1" "$2"
    ckptconv hf2mcore in out
    echo "exit $?"
    test ! -e out || echo "out written"
}
try activation_function relu
try activation_function gelu_pytorch_tanh
try scale_attn_by_inverse_layer_idx true
try reorder_and_upcast_attn true
try scale_attn_weights false
try add_cross_attention true
try n_inner 96
