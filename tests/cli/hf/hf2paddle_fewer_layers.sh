# hf2paddle holds the files against config.json the same way.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json num_hidden_layers 2
ckptconv hf2paddle in out
echo "exit $?"
test ! -e out
