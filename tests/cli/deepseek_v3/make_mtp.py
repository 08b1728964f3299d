"""make_mtp.py DIR [--head-differs]: give the DeepSeek-V3 model in DIR (config.json +
model.safetensors, num_hidden_layers N) a multi-token prediction layer as the release stores
one: layer N is a copy of layer N - 1's tensors plus enorm, hnorm ([hidden]), eh_proj
([hidden, 2 x hidden]) and shared_head.norm ([hidden]) of fixed pseudo-random bf16 values,
and embed_tokens / shared_head.head, copies of model.embed_tokens / lm_head (with
--head-differs, shared_head.head has one element changed); config.json says
num_nextn_predict_layers 1. The standard library only (edit_tensor.py's reader and writer)."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf"))
import edit_tensor  # noqa: E402


def values(n, seed):
    """n bf16 numbers in [-0.5, 0.5) from a linear congruential generator (fixed bytes)"""
    out, x = bytearray(), seed
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        out += struct.pack("<H", edit_tensor.f32_to_bf16((x >> 40) / 2**24 - 0.5))
    return out


def main():
    d = sys.argv[1]
    path, cfg_path = os.path.join(d, "model.safetensors"), os.path.join(d, "config.json")
    cfg = json.load(open(cfg_path))
    n, h = cfg["num_hidden_layers"], cfg["hidden_size"]
    meta, tensors = edit_tensor.load(path)
    by = {t[0]: t for t in tensors}
    last, mtp = "model.layers.%d." % (n - 1), "model.layers.%d." % n
    new = [[mtp + t[0][len(last):], t[1], list(t[2]), bytearray(t[3])] for t in tensors if t[0].startswith(last)]
    new += [[mtp + "enorm.weight", "BF16", [h], values(h, 1)], [mtp + "hnorm.weight", "BF16", [h], values(h, 2)],
            [mtp + "eh_proj.weight", "BF16", [h, 2 * h], values(2 * h * h, 3)],
            [mtp + "shared_head.norm.weight", "BF16", [h], values(h, 4)]]
    for name, of in (("embed_tokens.weight", "model.embed_tokens.weight"), ("shared_head.head.weight", "lm_head.weight")):
        t = by[of]
        new.append([mtp + name, t[1], list(t[2]), bytearray(t[3])])
    if "--head-differs" in sys.argv:
        new[-1][3][0] ^= 1
    edit_tensor.save(path, meta, tensors + new)
    cfg["num_nextn_predict_layers"] = 1
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)


if __name__ == "__main__":
    main()
