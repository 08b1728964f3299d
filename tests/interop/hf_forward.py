"""What the numpy forward passes of the Hugging Face checks share (float64, no transformers):
a directory's config.json and safetensors, the norms, causal attention, and the two commands
that compare a forward's logits with a reference and config.json with expected values."""

import json
import os

import numpy as np
from safetensors.numpy import load_file

from common import check


def load_config(d):
    with open(os.path.join(d, "config.json")) as f:
        return json.load(f)


def load_weights(d, rename=lambda k: k):
    """Every tensor of the directory's safetensors (sharded by an index or not) as float64."""
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for name in files:
        for k, v in load_file(os.path.join(d, name)).items():
            w[rename(k)] = v.astype(np.float64)
    return w


def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def causal_mask(t):
    return np.triu(np.full((t, t), -np.inf), k=1)


def attention(q, k, v, scale, mask):
    """Softmax attention of q [tokens, heads, head_dim] over k, v [tokens, kv heads, head_dim]
    (each kv head shared by heads / kv heads q heads), as [tokens, heads * head_dim]."""
    t, nh, hd = q.shape
    groups = nh // k.shape[1]
    k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    scores = np.einsum("qhd,khd->hqk", q, k) * scale + mask
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn = scores / scores.sum(axis=-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", attn, v).reshape(t, nh * hd)


def logits_command(forward):
    """The `logits HF_DIR LOGITS_JSON` command of a forward(d, input_ids) -> (logits, config)."""
    def cmd_logits(d, reference):
        with open(reference) as f:
            ref = json.load(f)
        logits, cfg = forward(d, ref["input_ids"])
        want = np.asarray(ref["logits"], dtype=np.float64)[:, :cfg["vocab_size"]]
        check(logits.shape == want.shape, f"logits of shape {logits.shape}, expected {want.shape}")
        scale = np.abs(want).max()
        err = np.abs(logits - want).max()
        print(f"max |difference| {err:.3g} over {want.size} logits (largest logit {scale:.3g})")
        check(err <= 1e-4 * max(scale, 1.0), f"logits differ from the reference by up to {err:.3g}")
    return cmd_logits


def cmd_config(d, *pairs):
    cfg = load_config(d)
    for pair in pairs:
        key, value = pair.split("=", 1)
        check(cfg.get(key) == json.loads(value), f"config.json {key} = {cfg.get(key)!r}, expected {value}")
