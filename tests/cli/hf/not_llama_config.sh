# A config.json of a family ckptconv does not know is refused before its weights are read,
# listing the known ones (by verify too: it would run the model as LLaMA); so is one whose
# model_type and architectures name two families.
edit() { python3 "$CLI_DIR/edit_json.py" "$@"; }
cp -r "$TESTDATA/hf/llama_tiny" in
edit in/config.json model_type qwen2
ckptconv hf2mcore in out
echo "exit $?"
edit in/config.json model_type gemma
ckptconv hf2mcore in out
echo "exit $?"
ckptconv verify in "$TESTDATA/hf/llama_tiny"
echo "exit $?"
test ! -e out
