# A config.json of another model family is refused before its weights are read.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json model_type qwen2
ckptconv hf2mcore in out
echo "exit $?"
test ! -e out
