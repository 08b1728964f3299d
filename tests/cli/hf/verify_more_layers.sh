# verify of a Hugging Face directory holds the files against config.json the same way.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json num_hidden_layers 6
ckptconv verify in --device cpu
echo "exit $?"
test ! -e out
