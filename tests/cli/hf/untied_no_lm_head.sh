# lm_head.weight dropped from the index of an untied model: refused rather than written
# without an output layer.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/model.safetensors.index.json weight_map/lm_head.weight --delete
ckptconv hf2mcore in out
echo "exit $?"
test ! -e out
