# num_hidden_layers 2^31 is past the bound; 2^31 - 1 meets the first missing layer at once
# (memory grew until killed); neither allocates by the count.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json num_hidden_layers 2147483648
timeout 60 ckptconv hf2mcore in out
echo "exit $?"
edit in/config.json num_hidden_layers 2147483647
timeout 60 ckptconv hf2mcore in out
echo "exit $?"
test ! -e out
