# num_hidden_layers smaller than the layers the files hold: refused, naming a tensor beyond
# (it wrote a 2-layer checkpoint whose files held 4).
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json num_hidden_layers 2
ckptconv hf2mcore in out
echo "exit $?"
test ! -e out
