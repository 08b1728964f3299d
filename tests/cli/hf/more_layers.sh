# num_hidden_layers larger than the layers the files hold: refused, naming the first missing
# tensor (it wrote layers holding only _extra_state).
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json num_hidden_layers 6
ckptconv hf2mcore in out
echo "exit $?"
test ! -e out
