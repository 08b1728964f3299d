"""Runs a Hugging Face GPT-2 directory (GPT2LMHeadModel) through a forward pass written here
(numpy, float64, no transformers) and compares its logits with reference logits computed by
the framework that wrote the source checkpoint. Written from GPT-2's definition, not from
ckptconv's maps: Conv1D weights are [in, out] (y = x @ W + b); c_attn's columns are
[all q | all k | all v]; LayerNorm with bias before attention and MLP; learned absolute
positions; gelu_new (tanh approximation) or gelu (erf); attention scaled by 1/sqrt(head_dim);
lm_head tied to wte unless the weights hold one. GPT2Model names (no `transformer.` prefix)
are read as well.

  logits HF_DIR LOGITS_JSON   the directory's config.json + safetensors, on the reference's
                              input_ids, give the reference logits for every vocabulary
                              column, within 1e-4 of the largest logit
  config HF_DIR KEY=VALUE...  config.json holds these values (JSON literals)
"""

import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import check, run_main  # noqa: E402


def load_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for name in files:
        for k, v in load_file(os.path.join(d, name)).items():
            w[k if k.startswith("transformer.") or k == "lm_head.weight" else "transformer." + k] = v.astype(np.float64)
    return w


def layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def conv1d(x, w, name):
    return x @ w[name + ".weight"] + w[name + ".bias"]


def forward(d, input_ids):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    check(cfg.get("model_type") == "gpt2", f"model_type {cfg.get('model_type')!r} is not gpt2")
    check(not cfg.get("scale_attn_by_inverse_layer_idx") and not cfg.get("reorder_and_upcast_attn"),
          "scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not run here")
    acts = {"gelu_new": gelu_new, "gelu": gelu_erf}
    act = cfg.get("activation_function", "gelu_new")
    check(act in acts, f"activation_function {act} is not run here")
    w = load_weights(d)
    hidden, nh = cfg["n_embd"], cfg["n_head"]
    hd = hidden // nh
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    scale = 1.0 / math.sqrt(hd) if cfg.get("scale_attn_weights", True) else 1.0
    ids = np.asarray(input_ids)
    t = len(ids)
    h = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][np.arange(t)]
    mask = np.triu(np.full((t, t), -np.inf), k=1)
    for layer in range(cfg["n_layer"]):
        p = f"transformer.h.{layer}."
        x = layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = conv1d(x, w, p + "attn.c_attn")
        q, k, v = (qkv[:, i * hidden:(i + 1) * hidden].reshape(t, nh, hd) for i in range(3))
        scores = np.einsum("qhd,khd->hqk", q, k) * scale + mask
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attn = scores / scores.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", attn, v).reshape(t, hidden)
        h = h + conv1d(o, w, p + "attn.c_proj")
        x = layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = h + conv1d(acts[act](conv1d(x, w, p + "mlp.c_fc")), w, p + "mlp.c_proj")
    h = layer_norm(h, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    head = w.get("lm_head.weight", w["transformer.wte.weight"])
    return h @ head.T, cfg


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


def cmd_config(d, *pairs):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    for pair in pairs:
        key, value = pair.split("=", 1)
        check(cfg.get(key) == json.loads(value), f"config.json {key} = {cfg.get(key)!r}, expected {value}")


if __name__ == "__main__":
    run_main({"logits": cmd_logits, "config": cmd_config})
