# A GPT-2 with the erf GELU (activation_function gelu) goes to Megatron-LM with its default
# GELU (openai_gelu False) and comes back as gelu; verify runs both sides with the erf GELU.
set -e
cp -r "$TESTDATA/hf/gpt2_tiny" in
python3 "$CLI_DIR/../hf/edit_json.py" in/config.json activation_function gelu
ckptconv hf2mcore in mc --tp 2 --pp 2 -q
ckptconv mcore2hf mc out -q
cmp in/model.safetensors out/model.safetensors
grep activation_function out/config.json
ckptconv verify in mc -q
ckptconv verify in out -q
