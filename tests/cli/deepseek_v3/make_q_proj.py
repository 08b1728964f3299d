"""make_q_proj.py DIR: make the DeepSeek-V3 model in DIR (config.json + model.safetensors) one
without query compression, as DeepSeek-V2-Lite is (q_lora_rank null): each layer's
self_attn.q_a_proj, q_a_layernorm and q_b_proj give way to one self_attn.q_proj of
[heads x qk_head_dim, hidden], whose column j is q_b_proj's column j mod q_lora_rank (q_b_proj
side by side with itself until it is hidden wide: fixed bytes, no arithmetic), placed where
q_a_proj was. testdata/gen/gen_derived_logits.py (deepseek_v3_q_proj) and
tests/unit/test_verify_mla.c derive the same. The standard library only."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf"))
import edit_tensor  # noqa: E402


def tiled(raw, rows, cols, width, elem):
    """the rows x cols matrix raw, its columns repeated until it is width wide"""
    out = bytearray()
    for r in range(rows):
        row = raw[r * cols * elem:(r + 1) * cols * elem]
        out += (row * (width // cols + 1))[:width * elem]
    return out


def main():
    d = sys.argv[1]
    path, cfg_path = os.path.join(d, "model.safetensors"), os.path.join(d, "config.json")
    cfg = json.load(open(cfg_path))
    hidden = cfg["hidden_size"]
    meta, tensors = edit_tensor.load(path)
    by_name = {t[0]: t for t in tensors}
    out = []
    for name, dtype, shape, raw in tensors:
        if name.endswith(".self_attn.q_a_proj.weight"):
            qb = by_name[name.replace("q_a_proj", "q_b_proj")]
            rows, cols = qb[2]
            out.append([name.replace("q_a_proj", "q_proj"), qb[1], [rows, hidden],
                        tiled(qb[3], rows, cols, hidden, len(qb[3]) // (rows * cols))])
        elif not name.endswith((".self_attn.q_a_layernorm.weight", ".self_attn.q_b_proj.weight")):
            out.append([name, dtype, shape, raw])
    edit_tensor.save(path, meta, out)
    cfg["q_lora_rank"] = None
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


if __name__ == "__main__":
    main()
