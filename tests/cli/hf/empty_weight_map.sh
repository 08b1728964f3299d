# An index whose weight_map is empty holds no weights: refused, naming the first tensor
# config.json implies; nothing written.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/model.safetensors.index.json weight_map "{}"
ckptconv hf2mcore in out
echo "exit $?"
test ! -e out
