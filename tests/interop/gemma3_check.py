"""Runs a Hugging Face Gemma 3 text model (Gemma3ForCausalLM, model_type gemma3_text) through a
forward pass written here from transformers' modeling_gemma3.py (numpy, float64, no
transformers), and compares its logits with those transformers computed when it wrote the
fixture:
  - embeddings times sqrt(hidden_size), the factor rounded to the weights' dtype first;
  - every RMSNorm (input, q/k per head, the sandwich norms, final) as x * (1 + w);
  - post_attention_layernorm on the attention output and post_feedforward_layernorm on the
    MLP output, each before its residual add; pre_feedforward_layernorm before the MLP;
  - attention scaled by query_pre_attn_scalar ** -0.5, not head_dim ** -0.5;
  - sliding-window layers (layer_types, or sliding_window_pattern) see keys k with
    q - sliding_window < k <= q and rotate with the local RoPE base, full layers see every
    earlier key and rotate with rope_theta (linear scaling on those only);
  - the MLP is down(gelu_tanh(gate(x)) * up(x)); output tied to the embeddings unless an
    lm_head is there.

  logits HF_DIR LOGITS_JSON   the reference logits, within 1e-4 of the largest logit
  logits450 HF_DIR LOGITS_JSON the same with config.json read as transformers 4.50-4.52 read
                              it: without rope_parameters and layer_types (rope_theta,
                              rope_local_base_freq, rope_scaling, sliding_window_pattern)
  config HF_DIR KEY=VALUE...  config.json holds these values (JSON literals)
  mcore RANK_FILE LOGITS_JSON a Megatron checkpoint at TP 1 PP 1 (hf2mcore's output, resharded)
                              run as Megatron-Bridge's Gemma 3 runs (gemma3_provider.py: TE
                              layers, post_layernorm inside linear_proj and linear_fc2,
                              zero-centred norms, embeddings times sqrt(hidden_size), the local
                              RoPE base on layers whose 1-based number is not a multiple of
                              window_attn_skip_freq, the other layers' inverse frequencies
                              divided by hf_rope_scaling_factor where the args have it (as
                              Gemma3RotaryEmbedding divides its global inv_freq by the
                              provider's rope_scaling_factor), window_size (left, 0) as Transformer Engine
                              reads it, softmax_scale), from its args alone, gives the reference
                              logits. megatron-core 0.16.1 cannot build this model (no post
                              norms in its layer spec, one RoPE base, no embedding scale), so
                              this forward stands in for it; it needs torch to unpickle
"""

import json
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
    w, dtype = {}, None
    for name in files:
        for k, v in load_file(os.path.join(d, name)).items():
            dtype = dtype or v.dtype
            w[k] = v.astype(np.float64)
    return w, dtype


def norm(x, weight, eps):
    """Gemma3RMSNorm: zero-centred weight."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + weight)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def rope(x, positions, theta, factor):
    """Rotate-half rotary embedding of x [tokens, heads, head_dim], linear scaling by factor."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d)) / factor
    freqs = positions[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    half = d // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def rope_of(cfg, kind):
    """(theta, linear factor) of a layer kind as transformers 5 (rope_parameters per layer type)
    or 4.5x (rope_theta, rope_local_base_freq, rope_scaling) says it."""
    by_type = cfg.get("rope_parameters") or {}
    r = by_type.get(kind)
    if r is None:
        r = dict(cfg.get("rope_scaling") or {}) if kind == "full_attention" else {}
        r.setdefault("rope_theta", cfg.get("rope_theta", 1e6) if kind == "full_attention"
                     else cfg.get("rope_local_base_freq", 1e4))
    rope_type = r.get("rope_type", r.get("type", "default"))
    check(rope_type in ("default", "linear"), f"rope_type {rope_type} is not run here")
    return r["rope_theta"], r.get("factor", 1.0) if rope_type == "linear" else 1.0


def layer_kinds(cfg):
    n = cfg["num_hidden_layers"]
    if cfg.get("layer_types"):
        return cfg["layer_types"]
    pattern = cfg.get("sliding_window_pattern", 6)
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]


# the keys transformers 4.50-4.52 do not read: they take Gemma 3's RoPE from rope_theta,
# rope_local_base_freq and rope_scaling and its layers from sliding_window_pattern
KEYS_5 = ("rope_parameters", "layer_types")


def forward(d, input_ids, as_450=False):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    if as_450:
        cfg = {k: v for k, v in cfg.items() if k not in KEYS_5}
    check(cfg.get("model_type") == "gemma3_text", f"model_type {cfg.get('model_type')!r} is not gemma3_text")
    for field in ("attn_logit_softcapping", "final_logit_softcapping"):
        check(cfg.get(field) is None, f"{field} is not run here")
    check(not cfg.get("use_bidirectional_attention"), "use_bidirectional_attention is not run here")
    w, dtype = load_weights(d)
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, window = cfg["rms_norm_eps"], cfg["sliding_window"]
    scale = cfg["query_pre_attn_scalar"] ** -0.5
    ids = np.asarray(input_ids)
    t = len(ids)
    pos = np.arange(t, dtype=np.float64)
    embed = w["model.embed_tokens.weight"]
    h = embed[ids] * float(np.asarray(cfg["hidden_size"] ** 0.5, dtype=dtype))
    causal = np.triu(np.full((t, t), -np.inf), k=1)
    # transformers' sliding window: key k is seen from query q when q - window < k <= q
    sliding = causal + np.tril(np.full((t, t), -np.inf), k=-window)
    for layer, kind in enumerate(layer_kinds(cfg)):
        p = f"model.layers.{layer}."
        theta, factor = rope_of(cfg, kind)
        x = norm(h, w[p + "input_layernorm.weight"], eps)
        q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(t, nh, hd)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(t, nkv, hd)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(t, nkv, hd)
        q = norm(q, w[p + "self_attn.q_norm.weight"], eps)
        k = norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, pos, theta, factor), rope(k, pos, theta, factor)
        k, v = np.repeat(k, nh // nkv, axis=1), np.repeat(v, nh // nkv, axis=1)
        mask = sliding if kind == "sliding_attention" else causal
        scores = np.einsum("qhd,khd->hqk", q, k) * scale + mask
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attn = scores / scores.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", attn, v).reshape(t, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = h + norm(o, w[p + "post_attention_layernorm.weight"], eps)
        x = norm(h, w[p + "pre_feedforward_layernorm.weight"], eps)
        gate = x @ w[p + "mlp.gate_proj.weight"].T
        up = x @ w[p + "mlp.up_proj.weight"].T
        m = (gelu_tanh(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        h = h + norm(m, w[p + "post_feedforward_layernorm.weight"], eps)
    h = norm(h, w["model.norm.weight"], eps)
    return h @ w.get("lm_head.weight", embed).T, cfg


def mcore_forward(path, input_ids):
    import torch

    ck = torch.load(path, map_location="cpu")
    a = vars(ck["args"])
    w = {k: v.double().numpy() for k, v in ck["model"].items() if torch.is_tensor(v) and v.is_floating_point()}
    check(a.get("gated_linear_unit") and not a.get("swiglu") and a.get("apply_layernorm_1p") and a.get("qk_layernorm"),
          "args are not a Gemma 3 model's (gated_linear_unit, no swiglu, apply_layernorm_1p, qk_layernorm)")
    check(a["tensor_model_parallel_size"] == 1 and a["pipeline_model_parallel_size"] == 1, "not TP 1 PP 1")
    nh, ng, hd, hidden = a["num_attention_heads"], a["num_query_groups"], a["kv_channels"], a["hidden_size"]
    eps, skip, (left, right) = a["norm_epsilon"], a["window_attn_skip_freq"], a["window_size"]
    factor = a.get("hf_rope_scaling_factor") or 1.0
    check(right == 0 and isinstance(skip, int), "window_size (left, 0) and an integer window_attn_skip_freq")
    ids = np.asarray(input_ids)
    t = len(ids)
    pos = np.arange(t, dtype=np.float64)
    embed = w["embedding.word_embeddings.weight"]
    h = embed[ids] * hidden ** 0.5
    q_idx, k_idx = np.arange(t)[:, None], np.arange(t)[None, :]
    causal = np.where(k_idx <= q_idx, 0.0, -np.inf)
    # Transformer Engine's window (left, 0): query i sees keys i - left .. i
    local = np.where((k_idx <= q_idx) & (k_idx >= q_idx - left), 0.0, -np.inf)
    for layer in range(a["num_layers"]):
        p = f"decoder.layers.{layer}."
        is_local = (layer + 1) % skip != 0
        theta = a["hf_rope_local_base_freq"] if is_local else a["rotary_base"]
        x = norm(h, w[p + "self_attention.linear_qkv.layer_norm_weight"], eps)
        qkv = (x @ w[p + "self_attention.linear_qkv.weight"].T).reshape(t, ng, (nh // ng + 2) * hd)
        q = qkv[:, :, : nh // ng * hd].reshape(t, nh, hd)
        k, v = qkv[:, :, nh // ng * hd: -hd], qkv[:, :, -hd:]
        q = norm(q, w[p + "self_attention.q_layernorm.weight"], eps)
        k = norm(k, w[p + "self_attention.k_layernorm.weight"], eps)
        scale = 1.0 if is_local else factor
        q, k = rope(q, pos, theta, scale), rope(k, pos, theta, scale)
        k, v = np.repeat(k, nh // ng, axis=1), np.repeat(v, nh // ng, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * a["softmax_scale"] + (local if is_local else causal)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attn = scores / scores.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", attn, v).reshape(t, nh * hd) @ w[p + "self_attention.linear_proj.weight"].T
        h = h + norm(o, w[p + "self_attention.linear_proj.post_layernorm.weight"], eps)
        x = norm(h, w[p + "mlp.linear_fc1.layer_norm_weight"], eps)
        gate, up = np.split(x @ w[p + "mlp.linear_fc1.weight"].T, 2, axis=-1)
        m = (gelu_tanh(gate) * up) @ w[p + "mlp.linear_fc2.weight"].T
        h = h + norm(m, w[p + "mlp.linear_fc2.post_layernorm.weight"], eps)
    h = norm(h, w["decoder.final_layernorm.weight"], eps)
    return (h @ w.get("output_layer.weight", embed).T)[:, : a["vocab_size"]]


def compare(logits, reference):
    want = np.asarray(reference["logits"], dtype=np.float64)[:, : logits.shape[1]]
    check(logits.shape == want.shape, f"logits of shape {logits.shape}, expected {want.shape}")
    scale = np.abs(want).max()
    err = np.abs(logits - want).max()
    print(f"max |difference| {err:.3g} over {want.size} logits (largest logit {scale:.3g})")
    check(err <= 1e-4 * max(scale, 1.0), f"logits differ from the reference by up to {err:.3g}")


def cmd_mcore(path, reference):
    with open(reference) as f:
        ref = json.load(f)
    compare(mcore_forward(path, ref["input_ids"]), ref)


def cmd_logits(d, reference, as_450=False):
    with open(reference) as f:
        ref = json.load(f)
    logits, cfg = forward(d, ref["input_ids"], as_450)
    check(logits.shape[1] == cfg["vocab_size"], "logits of another vocabulary size")
    compare(logits, ref)


def cmd_config(d, *pairs):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    for pair in pairs:
        key, value = pair.split("=", 1)
        check(cfg.get(key) == json.loads(value), f"config.json {key} = {cfg.get(key)!r}, expected {value}")


if __name__ == "__main__":
    run_main({"logits": cmd_logits, "logits450": lambda d, r: cmd_logits(d, r, True), "config": cmd_config,
              "mcore": cmd_mcore})
