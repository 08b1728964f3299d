#!/usr/bin/env python3
"""testdata/hf/{qwen2,mistral,llama3}_tiny: tiny models of the families hf2mcore/mcore2hf carry,
written by transformers' save_pretrained (one model.safetensors each), plus their logits.

    PYTHON gen_hf_families.py OUT_DIR       (OUT_DIR/qwen2_tiny, mistral_tiny, llama3_tiny)

Run twice: with transformers 4.x (OUT_DIR testdata/hf: config.json with rope_scaling,
rope_theta, torch_dtype) and 5.x (OUT_DIR testdata/hf/transformers5: rope_parameters, dtype,
Qwen2's layer_types); the versions are in each logits.json and README_hf_families.md.

All: vocab 128, hidden 32, 4 heads / 2 KV heads (head_dim 8), intermediate 64 (SwiGLU), 2
layers, rms_norm_eps 1e-5, float32; torch.manual_seed(1234) before construction
(transformers' own _init_weights), then every 1-D parameter (norms, Qwen2's q/k/v biases) +=
N(0, 0.05^2), seeded by sha256 of its name, so that none is all ones or zeros.
- qwen2_tiny: Qwen2ForCausalLM (q/k/v biases), rope_theta 1e6, tied embeddings (as the small
  Qwen2.5 models), no sliding window.
- mistral_tiny: MistralForCausalLM, sliding_window 4 (shorter than the 8 logits tokens, so the
  window changes the logits), rope_theta 10000, untied.
- llama3_tiny: LlamaForCausalLM with Llama 3.1's RoPE: rope_theta 500000, rope_scaling llama3
  (factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192),
  max_position_embeddings 131072, untied.
logits.json: the logits of INPUT_IDS (float32), and the versions that wrote the files.
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
COMMON = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, rms_norm_eps=1e-5, hidden_act="silu")


def models():
    from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                              Qwen2ForCausalLM)
    yield "qwen2_tiny", Qwen2ForCausalLM, Qwen2Config(
        rope_theta=1000000.0, tie_word_embeddings=True, max_position_embeddings=64, use_sliding_window=False,
        **COMMON)
    yield "mistral_tiny", MistralForCausalLM, MistralConfig(
        rope_theta=10000.0, tie_word_embeddings=False, max_position_embeddings=64, sliding_window=4, head_dim=8,
        **COMMON)
    yield "llama3_tiny", LlamaForCausalLM, LlamaConfig(
        rope_theta=500000.0, tie_word_embeddings=False, max_position_embeddings=131072, head_dim=8,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
        **COMMON)


def main():
    import safetensors
    import transformers

    out = sys.argv[1]
    for name, cls, cfg in models():
        d = os.path.join(out, name)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        torch.manual_seed(SEED)
        cfg.torch_dtype = torch.float32
        model = cls(cfg).to(torch.float32).eval()
        with torch.no_grad():
            for k, p in model.named_parameters():
                if p.dim() == 1:
                    seed = int.from_bytes(hashlib.sha256(k.encode()).digest()[:8], "little") >> 1
                    g = torch.Generator().manual_seed(seed)
                    p.add_(torch.randn(p.shape, generator=g) * 0.05)
        model.save_pretrained(d)
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)
        ids = torch.tensor([INPUT_IDS], dtype=torch.long)
        with torch.no_grad():
            logits = model(input_ids=ids).logits.float()
        with open(os.path.join(d, "logits.json"), "w") as f:
            json.dump({
                "input_ids": INPUT_IDS,
                "logits": [[round(float(x), 7) for x in row] for row in logits[0]],
                "class": type(model).__name__,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "safetensors": safetensors.__version__,
                "python": platform.python_version(),
            }, f)
        print(name, type(model).__name__, sorted(os.listdir(d)))


if __name__ == "__main__":
    main()
