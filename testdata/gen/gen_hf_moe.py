#!/usr/bin/env python3
"""testdata/hf/[transformers5/]{mixtral,qwen3_moe,deepseek_v3}_tiny: tiny mixture-of-experts models written by
transformers' save_pretrained (one model.safetensors each, bfloat16), plus their logits.

    PYTHON gen_hf_moe.py OUT_DIR [NAME...]   (OUT_DIR/NAME for each NAME, default all)

Mixtral and Qwen3-MoE: vocab 128, hidden 32, 4 heads / 2 KV heads, 2 layers, 4 experts, top-2, expert
intermediate 32 (SwiGLU), rms_norm_eps 1e-5, untied; torch.manual_seed(1234) before
construction (transformers' own _init_weights), then every 1-D parameter += N(0, 0.05^2) seeded
by sha256 of its name (as gen_hf_families.py), every parameter rounded to bfloat16, saved as
bfloat16 (config dtype bfloat16).
- mixtral_tiny: MixtralForCausalLM, head_dim 8, rope_theta 1e6, no sliding window.
- qwen3_moe_tiny: Qwen3MoeForCausalLM, head_dim 16 (4 x 16 != 32), q/k norms,
  moe_intermediate_size 32, intermediate_size 64 (no dense layer: mlp_only_layers [],
  decoder_sparse_step 1), norm_topk_prob False (Qwen3-MoE's default: softmax over all experts,
  top-k weights not renormalised), rope_theta 1e6.
- deepseek_v3_tiny: DeepseekV3ForCausalLM, vocab 128, hidden 32, 3 layers of which the first
  is dense (first_k_dense_replace 1, intermediate 64), 4 heads, MLA (q_lora_rank 16,
  kv_lora_rank 16, qk_nope_head_dim 8, qk_rope_head_dim 4, v_head_dim 8, rope_interleave),
  YaRN RoPE as released (factor 4 over original_max_position_embeddings 16, beta 32/1,
  mscale = mscale_all_dim = 1), 8 routed experts (moe_intermediate_size 16) in 4 groups, top-2
  of the best 2 groups, sigmoid scores with e_score_correction_bias (N(0, 0.5^2), so that it
  changes the routing), norm_topk_prob, routed_scaling_factor 2.5, one shared expert. No MTP
  layer: transformers builds none (its config says num_nextn_predict_layers 1 from 5.x on).
logits.json: the float32 forward (the bfloat16 weights cast to float32, as loaded in float32)
of INPUT_IDS, and the versions that wrote the files; "keys": the state-dict names save_pretrained
wrote, in file order (transformers 5 keeps the experts fused as 3-D gate_up_proj/down_proj in
memory and, by default, save_original_format=True, writes the per-expert names 4.x writes).
"""

import hashlib
import json
import os
import platform
import shutil
import sys

import torch

SEED = 1234
INPUT_IDS = [1, 17, 42, 99, 120, 3, 127, 64]
COMMON = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              rms_norm_eps=1e-5, hidden_act="silu", num_experts_per_tok=2, tie_word_embeddings=False,
              max_position_embeddings=64, rope_theta=1000000.0)


def mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM
    return MixtralForCausalLM, MixtralConfig(num_local_experts=4, intermediate_size=32, head_dim=8,
                                             sliding_window=None, **COMMON)


def qwen3_moe():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    return Qwen3MoeForCausalLM, Qwen3MoeConfig(num_experts=4, moe_intermediate_size=32, intermediate_size=64,
                                               head_dim=16, mlp_only_layers=[], decoder_sparse_step=1,
                                               norm_topk_prob=False, use_sliding_window=False, **COMMON)


def deepseek_v3():
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
    import transformers
    rope = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, beta_fast=32.0, beta_slow=1.0,
                mscale=1.0, mscale_all_dim=1.0)
    if int(transformers.__version__.split(".")[0]) >= 5:
        extra = dict(rope_parameters=dict(rope, rope_theta=10000.0))
    else:
        extra = dict(rope_scaling=dict(rope, type="yarn"), rope_theta=10000.0)
    common = {k: v for k, v in COMMON.items() if k not in ("num_key_value_heads", "rope_theta", "num_hidden_layers")}
    return DeepseekV3ForCausalLM, DeepseekV3Config(num_hidden_layers=3, first_k_dense_replace=1, num_key_value_heads=4,
                                                   n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=16,
                                                   intermediate_size=64, n_group=4, topk_group=2, norm_topk_prob=True,
                                                   routed_scaling_factor=2.5, q_lora_rank=16, kv_lora_rank=16,
                                                   qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8,
                                                   rope_interleave=True, **extra, **common)


FAMILIES = {"mixtral_tiny": mixtral, "qwen3_moe_tiny": qwen3_moe, "deepseek_v3_tiny": deepseek_v3}


def perturb(model):
    """Every 1-D parameter += N(0, 0.05^2) seeded by its name, and DeepSeek-V3's expert bias (a buffer that
    transformers initialises to zeros) N(0, 0.5^2) so that it changes which experts a token takes; then
    every one rounded to bfloat16, the dtype save_pretrained writes them in."""
    for k, p in list(model.named_parameters()) + [(k, b) for k, b in model.named_buffers()
                                                   if k.endswith("e_score_correction_bias")]:
        if p.dim() == 1:
            seed = int.from_bytes(hashlib.sha256(k.encode()).digest()[:8], "little") >> 1
            g = torch.Generator().manual_seed(seed)
            p.add_(torch.randn(p.shape, generator=g) * (0.5 if k.endswith("e_score_correction_bias") else 0.05))
        p.copy_(p.to(torch.bfloat16).to(torch.float32))


def main():
    import safetensors
    import transformers
    from safetensors import safe_open

    out = sys.argv[1]
    for name in sys.argv[2:] or FAMILIES:
        cls, cfg = FAMILIES[name]()
        d = os.path.join(out, name)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        torch.manual_seed(SEED)
        model = cls(cfg).to(torch.float32).eval()
        with torch.no_grad():
            perturb(model)
        ids = torch.tensor([INPUT_IDS], dtype=torch.long)
        with torch.no_grad():
            logits = model(input_ids=ids).logits.float()
        model.to(torch.bfloat16)
        model.config.torch_dtype = torch.bfloat16
        model.save_pretrained(d)
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)
        with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
            keys = list(f.keys())
        with open(os.path.join(d, "model.safetensors"), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            order = list(k for k in json.loads(f.read(n)) if k != "__metadata__")
        with open(os.path.join(d, "logits.json"), "w") as f:
            json.dump({
                "input_ids": INPUT_IDS,
                "logits": [[round(float(x), 7) for x in row] for row in logits[0]],
                "class": type(model).__name__,
                "keys": order if order else keys,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "safetensors": safetensors.__version__,
                "python": platform.python_version(),
            }, f)
        print(name, type(model).__name__, sorted(os.listdir(d)))


if __name__ == "__main__":
    main()
