"""Runs a Hugging Face LLaMA-family directory (llama, mistral, qwen2, qwen3) written by ckptconv
through a forward pass written here (numpy, float64, no transformers): q/k/v/o biases where the
weights have them, Qwen3's q/k RMSNorm per head (q_norm, k_norm, before RoPE), Mistral's
sliding window, llama3 RoPE scaling (rope_parameters or rope_scaling), and
compares its logits with reference logits computed by the framework that wrote the source
checkpoint.

  logits HF_DIR LOGITS_JSON   the directory's config.json + safetensors, on the reference's
                              input_ids, give the reference logits for every true vocabulary
                              column, within 1e-4 of the largest logit
  config HF_DIR KEY=VALUE...  config.json holds these values (JSON literals)
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import check, run_main  # noqa: E402
from hf_forward import attention, causal_mask, cmd_config, load_config, load_weights, logits_command, rms_norm  # noqa: E402


def llama3_inv_freq(inv_freq, r):
    """transformers' rope_type llama3: long wavelengths divided by factor, a smooth blend between."""
    factor, low, high = r["factor"], r["low_freq_factor"], r["high_freq_factor"]
    old = r["original_max_position_embeddings"]
    wavelen = 2 * np.pi / inv_freq
    scaled = np.where(wavelen > old / low, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return np.where(medium, smoothed, scaled)


def rope(x, positions, theta, scaling=None):
    """Rotate-half rotary embedding of x [tokens, heads, head_dim]."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    if scaling:
        inv_freq = llama3_inv_freq(inv_freq, scaling)
    freqs = positions[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    half = d // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def rope_config(cfg):
    """(theta, llama3 scaling or None) as transformers 5 (rope_parameters) or 4 reads them."""
    r = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    theta = r.get("rope_theta", cfg.get("rope_theta", 10000.0))
    kind = r.get("rope_type", r.get("type", "default"))
    check(kind in ("default", "llama3"), f"rope_type {kind} is not run here")
    return theta, r if kind == "llama3" else None


def linear(x, w, name):
    y = x @ w[name + ".weight"].T
    return y + w[name + ".bias"] if name + ".bias" in w else y


def forward(d, input_ids):
    cfg = load_config(d)
    w = load_weights(d)
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    eps = cfg["rms_norm_eps"]
    theta, scaling = rope_config(cfg)
    window = cfg.get("sliding_window") if cfg.get("model_type") == "mistral" else None
    ids = np.asarray(input_ids)
    t = len(ids)
    pos = np.arange(t, dtype=np.float64)
    h = w["model.embed_tokens.weight"][ids]
    mask = causal_mask(t)
    if window:
        # transformers' sliding window: key k is seen from query q when q - window < k <= q
        mask = mask + np.tril(np.full((t, t), -np.inf), k=-window)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        q = linear(x, w, p + "self_attn.q_proj").reshape(t, nh, hd)
        k = linear(x, w, p + "self_attn.k_proj").reshape(t, nkv, hd)
        v = linear(x, w, p + "self_attn.v_proj").reshape(t, nkv, hd)
        if p + "self_attn.q_norm.weight" in w:
            # Qwen3: each head's q and k RMS-normed over head_dim (one weight for all heads)
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, pos, theta, scaling), rope(k, pos, theta, scaling)
        o = attention(q, k, v, 1.0 / np.sqrt(hd), mask)
        h = h + linear(o, w, p + "self_attn.o_proj")
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        gate = x @ w[p + "mlp.gate_proj.weight"].T
        up = x @ w[p + "mlp.up_proj.weight"].T
        h = h + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    h = rms_norm(h, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return h @ head.T, cfg


if __name__ == "__main__":
    run_main({"logits": logits_command(forward), "config": cmd_config})
