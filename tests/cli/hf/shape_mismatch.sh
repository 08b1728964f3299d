# A size in config.json that the tensors do not have: refused naming the tensor, both shapes
# and the fields.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json intermediate_size 128
ckptconv hf2mcore in out --dry-run
echo "exit $?"
test ! -e out
