#!/usr/bin/env python3
"""testdata/hf/<family>_tiny: tiny models of the families ckptconv converts, written by
transformers' save_pretrained (one model.safetensors each), plus their logits.

    PYTHON gen_hf_families.py OUT_DIR [NAME...]   (OUT_DIR/NAME for each NAME, default all
                                                  that this transformers has)

Run twice: with transformers 4.x (OUT_DIR testdata/hf: config.json with rope_scaling,
rope_theta, torch_dtype) and 5.x (OUT_DIR testdata/hf/transformers5: rope_parameters, dtype,
Qwen2's layer_types); the versions are in each logits.json and README_hf_families.md.
transformers 4.46 has no Qwen3 and no Gemma 3: qwen3_tiny and gemma3_tiny are written by 5.x
only; gemma3_linear_tiny by 5.x and by 4.50 or later (Gemma 3's first 4.x release), each in its
own spelling.

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
- llama32_tiny: LlamaForCausalLM as Llama 3.2 1B/3B: tied embeddings, rope_theta 500000,
  llama3 RoPE scaling factor 32 (low 1, high 4, original 8192), max_position_embeddings 131072.
- qwen3_tiny: Qwen3ForCausalLM: q/k RMSNorm per head (q_norm, k_norm), head_dim 16 (so
  4 x 16 = 64 != hidden 32), rope_theta 1e6, untied.
- gemma3_tiny: Gemma3ForCausalLM (model_type gemma3_text): 4 layers, head_dim 16,
  query_pre_attn_scalar 24, sliding_window 4, layer_types sliding x 3 then full, RoPE theta
  1e4 (sliding) / 1e6 (full), gelu_pytorch_tanh GLU, (1 + w) norms with post-attention and
  pre/post-feedforward norms, tied, rms_norm_eps 1e-6.
- gemma3_linear_tiny: gemma3_tiny's model with the RoPE of gemma-3-4b/12b/27b: linear scaling
  (factor 8) on the full-attention layers only; 2 layers (sliding, then full), intermediate 32
  (to stay small), the rest as gemma3_tiny. transformers 5 says it as rope_parameters per layer
  type, 4.5x as rope_scaling {"rope_type": "linear", "factor": 8.0} beside rope_theta and
  rope_local_base_freq.
- gpt2_tiny: GPT2LMHeadModel: n_embd 32, 2 layers, 4 heads, n_positions 64, n_inner default
  (4 x 32), gelu_new, LayerNorm eps 1e-5 with biases, Conv1D weights, learned absolute
  positions, tied; bos/eos 127 (GPT-2's <|endoftext|> is its last id).
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


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    return Qwen2ForCausalLM, Qwen2Config(
        rope_theta=1000000.0, tie_word_embeddings=True, max_position_embeddings=64, use_sliding_window=False,
        **COMMON)


def mistral():
    from transformers import MistralConfig, MistralForCausalLM
    return MistralForCausalLM, MistralConfig(
        rope_theta=10000.0, tie_word_embeddings=False, max_position_embeddings=64, sliding_window=4, head_dim=8,
        **COMMON)


def llama3(factor=8.0, tied=False):
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM, LlamaConfig(
        rope_theta=500000.0, tie_word_embeddings=tied, max_position_embeddings=131072, head_dim=8,
        rope_scaling={"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
        **COMMON)


def qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM
    return Qwen3ForCausalLM, Qwen3Config(
        rope_theta=1000000.0, tie_word_embeddings=False, max_position_embeddings=64, head_dim=16,
        use_sliding_window=False, **COMMON)


def gemma3():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    return Gemma3ForCausalLM, Gemma3TextConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, sliding_window=4,
        layer_types=["sliding_attention"] * 3 + ["full_attention"], max_position_embeddings=64,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True)


def gemma3_linear():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    if version() >= (5, 0):
        rope = dict(rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
    else:
        rope = dict(rope_scaling={"rope_type": "linear", "factor": 8.0}, rope_theta=1000000.0,
                    rope_local_base_freq=10000.0)
    return Gemma3ForCausalLM, Gemma3TextConfig(
        vocab_size=128, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, sliding_window=4,
        layer_types=["sliding_attention", "full_attention"], max_position_embeddings=64, rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, **rope)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel, GPT2Config(
        vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64, activation_function="gelu_new",
        layer_norm_epsilon=1e-5, tie_word_embeddings=True, bos_token_id=127, eos_token_id=127)


# name -> (builder, the oldest transformers version that writes it: 4.46's set has no Qwen3 and
# no Gemma 3, so those are 5.x's only, but for gemma3_linear_tiny, written by 4.5x too)
FAMILIES = {
    "qwen2_tiny": (qwen2, (4, 0)),
    "mistral_tiny": (mistral, (4, 0)),
    "llama3_tiny": (llama3, (4, 0)),
    "llama32_tiny": (lambda: llama3(factor=32.0, tied=True), (4, 0)),
    "qwen3_tiny": (qwen3, (5, 0)),
    "gemma3_tiny": (gemma3, (5, 0)),
    "gemma3_linear_tiny": (gemma3_linear, (4, 50)),
    "gpt2_tiny": (gpt2, (4, 0)),
}


def version():
    import transformers

    return tuple(int(x) for x in transformers.__version__.split(".")[:2])


def models(names):
    import transformers

    for name in names or FAMILIES:
        build, since = FAMILIES[name]
        if version() < since:
            if names:
                sys.exit("%s needs transformers %d.%d or later (this is %s)" % (name, *since, transformers.__version__))
            continue
        cls, cfg = build()
        yield name, cls, cfg


def main():
    import safetensors
    import transformers

    out = sys.argv[1]
    for name, cls, cfg in models(sys.argv[2:]):
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
