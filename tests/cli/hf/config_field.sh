# Each config error names config.json and the field: a size that is not an integer, one
# that is missing, a head count that does not divide.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json vocab_size '"200"'
ckptconv hf2mcore in out
echo "exit $?"
edit in/config.json vocab_size --delete
ckptconv hf2mcore in out
echo "exit $?"
edit in/config.json vocab_size 200
edit in/config.json num_key_value_heads 3
ckptconv hf2mcore in out
echo "exit $?"
test ! -e out
