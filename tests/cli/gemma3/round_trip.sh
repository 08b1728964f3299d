# Gemma 3 (Gemma3ForCausalLM, transformers 5) to Megatron at TP 2 PP 2 with Megatron-Bridge's
# Transformer Engine layers and back: the same model.safetensors byte for byte, the same
# gemma3_text config.json as transformers wrote (layer types, both RoPE bases,
# query_pre_attn_scalar, tied; all but transformers_version), and verify finds the Megatron
# model and the HF model it came from equal layer by layer.
set -e
src="$TESTDATA/hf/transformers5/gemma3_tiny"
ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
ckptconv inspect mc | grep -o 'decoder\.layers\.[0-9]*\.[a-z0-9_.]*post_layernorm\.weight' | sort -u
ckptconv mcore2hf mc hf -q
cmp "$src/model.safetensors" hf/model.safetensors
grep -v '"transformers_version"' "$src/config.json" | diff - hf/config.json
ckptconv verify "$src" hf -q
ckptconv verify "$src" mc -q
