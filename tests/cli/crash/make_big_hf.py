"""Writes a LLaMA-shaped Hugging Face directory of zeros (bfloat16, hidden 4096, ffn 11008,
32 heads, 8 KV heads, vocabulary 32000, LAYERS layers) for the crash tests: big enough that
a conversion of it takes a second or more, written as a sparse file so that it takes no
time to make. A tensor name prefix (PREFIX) tells two of them apart.

  python3 make_big_hf.py DIR [LAYERS] [PREFIX]
"""
import json
import os
import struct
import sys

out = sys.argv[1]
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
prefix = sys.argv[3] if len(sys.argv) > 3 else "model"
H, F, V, KV = 4096, 11008, 32000, 8 * 128
shapes = {prefix + ".embed_tokens.weight": [V, H], "lm_head.weight": [V, H], prefix + ".norm.weight": [H]}
for i in range(layers):
    p = f"{prefix}.layers.{i}."
    shapes.update({p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [KV, H],
                   p + "self_attn.v_proj.weight": [KV, H], p + "self_attn.o_proj.weight": [H, H],
                   p + "mlp.gate_proj.weight": [F, H], p + "mlp.up_proj.weight": [F, H],
                   p + "mlp.down_proj.weight": [H, F], p + "input_layernorm.weight": [H],
                   p + "post_attention_layernorm.weight": [H]})
header, off = {}, 0
for name, shape in shapes.items():
    n = 2
    for d in shape:
        n *= d
    header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
    off += n
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    f.truncate(8 + len(text) + off)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": F,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": layers, "vocab_size": V,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
           "torch_dtype": "bfloat16"}, open(os.path.join(out, "config.json"), "w"))
