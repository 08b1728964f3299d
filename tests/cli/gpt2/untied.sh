# A GPT-2 with its own lm_head (tie_word_embeddings false) keeps it through Megatron-LM
# (untie_embeddings_and_output_weights) and back: every tensor equal, the config still untied,
# verify passing on both.
set -e
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
cp -r "$TESTDATA/hf/gpt2_tiny" in
edit in/model.safetensors copy transformer.wte.weight lm_head.weight
edit in/model.safetensors add lm_head.weight 0.5
python3 "$CLI_DIR/../hf/edit_json.py" in/config.json tie_word_embeddings false
ckptconv hf2mcore in mc --tp 2 --pp 2 -q
ckptconv mcore2hf mc out -q
ckptconv diff in out | tail -n 1
grep tie_word_embeddings out/config.json
ckptconv verify in mc -q
ckptconv verify in out -q
