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

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import check, run_main  # noqa: E402
from hf_forward import attention, causal_mask, cmd_config, layer_norm, load_config, load_weights, logits_command  # noqa: E402


def hub_name(k):
    """GPT2LMHeadModel's name of a tensor (GPT2Model's lack `transformer.`)."""
    return k if k.startswith("transformer.") or k == "lm_head.weight" else "transformer." + k


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def conv1d(x, w, name):
    return x @ w[name + ".weight"] + w[name + ".bias"]


def forward(d, input_ids):
    cfg = load_config(d)
    check(cfg.get("model_type") == "gpt2", f"model_type {cfg.get('model_type')!r} is not gpt2")
    check(not cfg.get("scale_attn_by_inverse_layer_idx") and not cfg.get("reorder_and_upcast_attn"),
          "scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not run here")
    acts = {"gelu_new": gelu_new, "gelu": gelu_erf}
    act = cfg.get("activation_function", "gelu_new")
    check(act in acts, f"activation_function {act} is not run here")
    w = load_weights(d, hub_name)
    hidden, nh = cfg["n_embd"], cfg["n_head"]
    hd = hidden // nh
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    scale = 1.0 / math.sqrt(hd) if cfg.get("scale_attn_weights", True) else 1.0
    ids = np.asarray(input_ids)
    t = len(ids)
    h = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][np.arange(t)]
    mask = causal_mask(t)
    for layer in range(cfg["n_layer"]):
        p = f"transformer.h.{layer}."
        x = layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = conv1d(x, w, p + "attn.c_attn")
        q, k, v = (qkv[:, i * hidden:(i + 1) * hidden].reshape(t, nh, hd) for i in range(3))
        o = attention(q, k, v, scale, mask)
        h = h + conv1d(o, w, p + "attn.c_proj")
        x = layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = h + conv1d(acts[act](conv1d(x, w, p + "mlp.c_fc")), w, p + "mlp.c_proj")
    h = layer_norm(h, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    head = w.get("lm_head.weight", w["transformer.wte.weight"])
    return h @ head.T, cfg


if __name__ == "__main__":
    run_main({"logits": logits_command(forward), "config": cmd_config})
