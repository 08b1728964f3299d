#!/usr/bin/env python3
"""Converts a Hugging Face Mixtral model (bf16 safetensors) to a Megatron-LM mcore GPT checkpoint
(--ckpt-format torch, local layer names, SequentialMLP experts) at TP 1 and any PP and EP, the way
it is done in Python today: the reference `ckptconv hf2mcore --ep` is compared with in
tests/bench/moe_mixtral.sh.

    moe_python.py HF_DIR OUT --pp P --ep E

What the usual conversion scripts do (Pai-Megatron-Patch's hf2mcore, Megatron-Bridge's
importers): load every safetensors shard into memory (safetensors.torch.load_file), then for each
(pipeline stage, expert-parallel rank) build that rank's state dict with Megatron's names, fusing
q/k/v per query group and each expert's w1/w3 into linear_fc1, and torch.save it.

- OUT/iter_0000001/mp_rank_00[_PPP][_EEE]/model_optim_rng.pt with `args`, `checkpoint_version`
  3.0, `iteration` 1, `model` (keys in the order megatron-core's state_dict gives: per layer
  input_layernorm, linear_proj, linear_qkv, pre_mlp_layernorm, router, then each local expert's
  linear_fc1 and linear_fc2, each linear followed by its _extra_state, None for local layers) and
  `num_floating_point_operations_so_far` 0; OUT/latest_checkpointed_iteration.txt.
- Stage s holds layers s*L/P .. (s+1)*L/P - 1, numbered from 0 in the stage; the first stage the
  embedding, the last the final norm and output layer. EP rank r holds experts r*N/E .. with local
  indices 0..N/E-1 and a copy of everything else.
- The vocabulary is not padded: the bench's is a multiple of 128.
"""

import argparse
import glob
import json
import os
from argparse import Namespace
from collections import OrderedDict

import torch
from safetensors.torch import load_file


def qkv(q, k, v, groups, head_dim):
    per = q.shape[0] // groups
    parts = []
    for g in range(groups):
        parts += [q[g * per:(g + 1) * per], k[g * head_dim:(g + 1) * head_dim], v[g * head_dim:(g + 1) * head_dim]]
    return torch.cat(parts, 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--ep", type=int, default=1)
    o = ap.parse_args()

    cfg = json.load(open(os.path.join(o.hf_dir, "config.json"), encoding="utf-8"))
    sd = {}
    for f in sorted(glob.glob(os.path.join(o.hf_dir, "*.safetensors"))):
        sd.update(load_file(f))
    layers, experts = cfg["num_hidden_layers"], cfg["num_local_experts"]
    heads, groups = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    if layers % o.pp or experts % o.ep:
        raise SystemExit("moe_python: PP must divide the layers and EP the experts")
    per_stage, local = layers // o.pp, experts // o.ep

    args = Namespace(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=o.pp, expert_model_parallel_size=o.ep,
        num_layers=layers, hidden_size=cfg["hidden_size"], ffn_hidden_size=cfg["intermediate_size"],
        moe_ffn_hidden_size=cfg["intermediate_size"], num_attention_heads=heads, num_query_groups=groups,
        group_query_attention=groups != heads, kv_channels=head_dim, swiglu=True, normalization="RMSNorm",
        norm_epsilon=cfg["rms_norm_eps"], untie_embeddings_and_output_weights=not cfg["tie_word_embeddings"],
        vocab_size=cfg["vocab_size"], padded_vocab_size=cfg["vocab_size"], add_bias_linear=False,
        position_embedding_type="rope", rotary_base=int(cfg["rope_theta"]), num_experts=experts,
        moe_router_topk=cfg["num_experts_per_tok"], transformer_impl="local", bf16=True,
        params_dtype=torch.bfloat16, ckpt_format="torch")

    it = os.path.join(o.out, "iter_0000001")
    for s in range(o.pp):
        for r in range(o.ep):
            m = OrderedDict()  # a module's state_dict, as Megatron saves it
            if s == 0:
                m["embedding.word_embeddings.weight"] = sd["model.embed_tokens.weight"]
            for j in range(per_stage):
                h, p = f"model.layers.{s * per_stage + j}.", f"decoder.layers.{j}."
                m[p + "input_layernorm.weight"] = sd[h + "input_layernorm.weight"]
                m[p + "self_attention.linear_proj.weight"] = sd[h + "self_attn.o_proj.weight"]
                m[p + "self_attention.linear_proj._extra_state"] = None
                m[p + "self_attention.linear_qkv.weight"] = qkv(
                    sd[h + "self_attn.q_proj.weight"], sd[h + "self_attn.k_proj.weight"],
                    sd[h + "self_attn.v_proj.weight"], groups, head_dim)
                m[p + "self_attention.linear_qkv._extra_state"] = None
                m[p + "pre_mlp_layernorm.weight"] = sd[h + "post_attention_layernorm.weight"]
                m[p + "mlp.router.weight"] = sd[h + "block_sparse_moe.gate.weight"]
                for i in range(local):
                    e, q = f"{h}block_sparse_moe.experts.{r * local + i}.", f"{p}mlp.experts.local_experts.{i}."
                    m[q + "linear_fc1.weight"] = torch.cat([sd[e + "w1.weight"], sd[e + "w3.weight"]], 0)
                    m[q + "linear_fc1._extra_state"] = None
                    m[q + "linear_fc2.weight"] = sd[e + "w2.weight"]
                    m[q + "linear_fc2._extra_state"] = None
            if s == o.pp - 1:
                m["decoder.final_layernorm.weight"] = sd["model.norm.weight"]
                m["output_layer.weight"] = sd["lm_head.weight"]
                m["output_layer._extra_state"] = None
            name = "mp_rank_00" + (f"_{s:03d}" if o.pp > 1 else "") + (f"_{r:03d}" if o.ep > 1 else "")
            os.makedirs(os.path.join(it, name))
            torch.save({"args": args, "checkpoint_version": 3.0, "iteration": 1, "model": m,
                        "num_floating_point_operations_so_far": 0},
                       os.path.join(it, name, "model_optim_rng.pt"))
    with open(os.path.join(o.out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("1")


if __name__ == "__main__":
    main()
