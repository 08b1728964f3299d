"""The torch way of checking a conversion layer by layer, for tests/bench/verify.sh: load both
Hugging Face LLaMA checkpoints whole (safetensors -> torch, float32), run every layer of
each on the same random hidden states, then the final norm and the logits, and print the
relative L2 distance of each. This is what users write today (transformers' from_pretrained
of both models, then hooks or a loop over model.layers), minus the model classes.

  python verify_python.py A_DIR B_DIR [--tokens N] [--seed S]

Runs in the project venv (Debian's torch 1.13 and safetensors).
"""
import argparse
import glob
import json
import math
import os

import torch
from safetensors.torch import load_file


def load(d):
    sd = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        sd.update({k: v.float() for k, v in load_file(f).items()})
    return sd, json.load(open(os.path.join(d, "config.json")))


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(cfg, tokens, d):
    inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    freqs = torch.outer(torch.arange(tokens, dtype=torch.float32), inv)
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos(), emb.sin()


def rotate(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin


def layer(sd, cfg, i, x, cos, sin):
    p = f"model.layers.{i}."
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    d = cfg.get("head_dim") or cfg["hidden_size"] // nh
    t = x.shape[0]
    h = rms(x, sd[p + "input_layernorm.weight"], cfg["rms_norm_eps"])
    q = (h @ sd[p + "self_attn.q_proj.weight"].T).view(t, nh, d).transpose(0, 1)
    k = (h @ sd[p + "self_attn.k_proj.weight"].T).view(t, nkv, d).transpose(0, 1)
    v = (h @ sd[p + "self_attn.v_proj.weight"].T).view(t, nkv, d).transpose(0, 1)
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    k = k.repeat_interleave(nh // nkv, 0)
    v = v.repeat_interleave(nh // nkv, 0)
    s = (q @ k.transpose(1, 2)) / math.sqrt(d)
    s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    a = (s.softmax(-1) @ v).transpose(0, 1).reshape(t, nh * d) @ sd[p + "self_attn.o_proj.weight"].T
    h2 = rms(x + a, sd[p + "post_attention_layernorm.weight"], cfg["rms_norm_eps"])
    g = torch.nn.functional.silu(h2 @ sd[p + "mlp.gate_proj.weight"].T) * (h2 @ sd[p + "mlp.up_proj.weight"].T)
    return a + g @ sd[p + "mlp.down_proj.weight"].T


def rel(a, b):
    return ((a - b).norm() / a.norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    (sa, ca), (sb, cb) = load(args.a), load(args.b)
    d = ca.get("head_dim") or ca["hidden_size"] // ca["num_attention_heads"]
    cos, sin = rope_tables(ca, args.tokens, d)
    for i in range(ca["num_hidden_layers"]):
        g = torch.Generator().manual_seed(args.seed * 1000 + i)
        x = torch.randn(args.tokens, ca["hidden_size"], generator=g)
        print(f"layer {i}: rel L2 {rel(layer(sa, ca, i, x, cos, sin), layer(sb, cb, i, x, cos, sin)):.3e}")
    x = torch.randn(args.tokens, ca["hidden_size"], generator=torch.Generator().manual_seed(args.seed))
    na, nb = rms(x, sa["model.norm.weight"], ca["rms_norm_eps"]), rms(x, sb["model.norm.weight"], cb["rms_norm_eps"])
    print(f"final_norm: rel L2 {rel(na, nb):.3e}")
    print(f"logits: rel L2 {rel(na @ sa['lm_head.weight'].T, nb @ sb['lm_head.weight'].T):.3e}")


if __name__ == "__main__":
    main()
