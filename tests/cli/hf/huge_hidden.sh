# hidden_size 2^40 is refused naming config.json and the field (it was written into args).
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json hidden_size 1099511627776
ckptconv hf2mcore in out
echo "exit $?"
test ! -e out
