# inspect of a Hugging Face directory of one model.safetensors (no index) reads it, and says
# which model its config.json describes -- or why that is none ckptconv converts.
set -e
cp -r "$TESTDATA/hf/qwen2_tiny" qwen2
ckptconv inspect qwen2 | grep -v "^model\.layers\.1\."
cp -r "$TESTDATA/hf/mistral_tiny" in
python3 "$CLI_DIR/edit_json.py" in/config.json model_type gemma
ckptconv inspect in | tail -n 2
