# Gemma 3 (Gemma3ForCausalLM, transformers 5) to Megatron at TP 2 PP 2 with Megatron-Bridge's
# Transformer Engine layers and back: the same model.safetensors byte for byte, the same
# gemma3_text config.json as transformers 5 wrote (layer types, both RoPE bases,
# query_pre_attn_scalar, tied; all but transformers_version) plus exactly the keys transformers
# 4.5x reads them from (rope_theta, rope_local_base_freq, rope_scaling, torch_dtype, and the
# every-Nth-layer sliding_window_pattern of 4.50-4.52, which have no layer_types); either
# spelling alone reads back as the same config; verify finds the Megatron model and the HF
# model it came from equal layer by layer.
set -e
src="$TESTDATA/hf/transformers5/gemma3_tiny"
ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
ckptconv inspect mc | grep -o 'decoder\.layers\.[0-9]*\.[a-z0-9_.]*post_layernorm\.weight' | sort -u
ckptconv mcore2hf mc hf -q
cmp "$src/model.safetensors" hf/model.safetensors
python3 "$CLI_DIR/config_4x.py" check "$src/config.json" hf/config.json
python3 "$CLI_DIR/config_4x.py" split hf/config.json in4 in5
for d in in4 in5; do
    cp "$src/model.safetensors" $d/
    ckptconv hf2mcore $d $d.mc -q
    ckptconv mcore2hf $d.mc $d.hf -q
    cmp hf/config.json $d.hf/config.json
done
ckptconv verify "$src" hf -q
ckptconv verify "$src" mc -q
