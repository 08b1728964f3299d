#!/usr/bin/env python3
"""Converts a Megatron-LM mcore GPT checkpoint of a LLaMA-family model (--ckpt-format torch,
any TP/PP) to a Hugging Face directory the way it is written in Python today: the reference
`ckptconv mcore2hf` is compared with in tests/bench/hf2mcore.sh.

    mcore2hf_python.py ROOT OUT

Megatron-LM ships no mcore -> Hugging Face converter for GPT/LLaMA models: tools/checkpoint
(core_v0.16.1) has savers for Megatron formats and LLaVA only. The maintained export,
Megatron-Bridge's AutoBridge.export_ckpt, is documented for NVIDIA's NeMo container on GPUs
and is not set up here. This is the script users write instead: torch.load of every rank
file, the tensors merged over TP by Megatron's rules and renamed to transformers'
LlamaForCausalLM, then safetensors.torch.save_file.

- Ranks: iter_NNNNNNN/mp_rank_TT[_PPP]/model_optim_rng.pt; TP, PP and the model sizes from
  args; pipeline stages hold local layer numbers, offset by stage x layers / PP (even split).
- linear_qkv (per query group [q x heads/groups, k, v], dim 0 per TP rank) becomes q_proj,
  k_proj, v_proj; linear_fc1 ([gate_r; up_r] per TP rank) gate_proj and up_proj;
  linear_proj and linear_fc2 are concatenated on dim 1 (o_proj, down_proj); the vocabulary
  tables on dim 0, cut to args.vocab_size rows; norms (local or Transformer Engine names)
  come from TP rank 0; _extra_state entries are left out.
- OUT/model.safetensors (save_file, metadata format=pt) and OUT/config.json (LlamaForCausalLM
  with the sizes of args).
"""

import argparse
import json
import os
import re
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ckpt as mc  # noqa: E402

LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")
NORMS = {
    "input_layernorm.weight": "input_layernorm.weight",
    "self_attention.linear_qkv.layer_norm_weight": "input_layernorm.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
    "mlp.linear_fc1.layer_norm_weight": "post_attention_layernorm.weight",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root")
    ap.add_argument("out")
    o = ap.parse_args()

    _, _, files = mc.rank_files(o.root)
    sds = {k: mc.load(p) for k, p in files.items()}
    a = sds[(0, 0)]["args"]
    tp, pp, layers = a.tensor_model_parallel_size, a.pipeline_model_parallel_size, a.num_layers
    heads = a.num_attention_heads
    groups = a.num_query_groups if getattr(a, "group_query_attention", False) else heads
    head_dim = a.kv_channels or a.hidden_size // heads
    vocab = a.vocab_size
    per_stage = layers // pp

    # every model tensor as its TP parts, under its global name
    parts = {}
    for (t, p), sd in sorted(sds.items()):
        for k, v in sd["model"].items():
            if k.endswith("._extra_state") or not isinstance(v, torch.Tensor):
                continue
            m = LAYER.match(k)
            if m:
                k = f"decoder.layers.{int(m.group(1)) + p * per_stage}.{m.group(2)}"
            parts.setdefault(k, {})[t] = v
    del sds

    def cat(k, dim):
        return torch.cat([parts[k][t] for t in range(tp)], dim=dim)

    out = {"model.embed_tokens.weight": cat("embedding.word_embeddings.weight", 0)[:vocab].contiguous()}
    for i in range(layers):
        src, dst = f"decoder.layers.{i}.", f"model.layers.{i}."
        qkv = cat(src + "self_attention.linear_qkv.weight", 0)
        qkv = qkv.reshape(groups, heads // groups + 2, head_dim, a.hidden_size)
        q, k, v = torch.split(qkv, [heads // groups, 1, 1], dim=1)
        out[dst + "self_attn.q_proj.weight"] = q.reshape(-1, a.hidden_size).contiguous()
        out[dst + "self_attn.k_proj.weight"] = k.reshape(-1, a.hidden_size).contiguous()
        out[dst + "self_attn.v_proj.weight"] = v.reshape(-1, a.hidden_size).contiguous()
        out[dst + "self_attn.o_proj.weight"] = cat(src + "self_attention.linear_proj.weight", 1)
        fc1 = [torch.chunk(parts[src + "mlp.linear_fc1.weight"][t], 2, dim=0) for t in range(tp)]
        out[dst + "mlp.gate_proj.weight"] = torch.cat([g for g, _ in fc1], dim=0)
        out[dst + "mlp.up_proj.weight"] = torch.cat([u for _, u in fc1], dim=0)
        out[dst + "mlp.down_proj.weight"] = cat(src + "mlp.linear_fc2.weight", 1)
        for name, hf in NORMS.items():
            if src + name in parts:
                out[dst + hf] = parts[src + name][0]
    out["model.norm.weight"] = parts["decoder.final_layernorm.weight"][0]
    if getattr(a, "untie_embeddings_and_output_weights", False):
        out["lm_head.weight"] = cat("output_layer.weight", 0)[:vocab].contiguous()

    os.makedirs(o.out, exist_ok=True)
    save_file(out, os.path.join(o.out, "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": a.hidden_size,
        "intermediate_size": a.ffn_hidden_size,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": groups,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "max_position_embeddings": a.max_position_embeddings,
        "rms_norm_eps": getattr(a, "norm_epsilon", None) or getattr(a, "layernorm_epsilon", 1e-5),
        "rope_theta": float(getattr(a, "rotary_base", 10000)),
        "tie_word_embeddings": not getattr(a, "untie_embeddings_and_output_weights", False),
        "torch_dtype": str(next(iter(out.values())).dtype).replace("torch.", ""),
        "hidden_act": "silu",
    }
    with open(os.path.join(o.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"mcore2hf_python: TP{tp} PP{pp} -> {o.out}: {len(out)} tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
