"""Writes a LLaMA-7B-shaped PaddleNLP checkpoint directory for the pd2te benchmark.

Run with the venv Python (paddlepaddle + numpy):

    .venv/bin/python tests/bench/make_llama_pd.py OUT_DIR [--layers N]

OUT_DIR gets `model_state.pdparams` (one paddle.save of a dict of name -> bfloat16
paddle.Tensor, as PaddleNLP saves a single-card bf16 run with fuse_attention_ffn on and
fuse_attention_qkv off, the layout the TransformerEngine converter expects) and a PaddleNLP
`config.json`. Shapes are LLaMA-7B's (hidden 4096, ffn 11008, vocab 32000, 32 heads, MHA);
only the layer count is smaller. bf16 because that is what PaddleNLP trains and saves; the
default 5 layers give 2.55 GB (2.37 GiB) of tensor data, above the 2 GB the benchmark asks
for while the Python converter (which holds the state dict several times over) still fits
well inside 24 GB of RAM.

Values are a cheap deterministic hash of (tensor, element index) turned into finite bf16 bit
patterns, so every element differs from its transposed neighbour and a layout mistake cannot
hide, without spending minutes in a random number generator. The directory is written under
OUT_DIR.tmp and renamed into place, so an interrupted run never leaves a half-written cache.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import paddle

HIDDEN, FFN, VOCAB, HEADS, KV_HEADS = 4096, 11008, 32000, 32, 32
CHUNK = 1 << 24


def bf16_pattern(n, seed, exponent_lo, exponent_span):
    """n bf16 bit patterns: hash-chosen sign and mantissa, exponent in a small sane range."""
    out = np.empty(n, dtype=np.uint16)
    mix = np.uint32((seed * 0x9E3779B9 + 0x7F4A7C15) & 0xFFFFFFFF)
    for start in range(0, n, CHUNK):
        end = min(n, start + CHUNK)
        h = np.arange(start, end, dtype=np.uint32)
        h *= np.uint32(2654435761)
        h ^= mix
        h ^= h >> np.uint32(15)
        h *= np.uint32(0x2C1B3C6D)
        h ^= h >> np.uint32(12)
        exponent = np.uint32(exponent_lo) + (h >> np.uint32(8)) % np.uint32(exponent_span)
        bits = ((h >> np.uint32(20)) & np.uint32(1)) << np.uint32(15)
        bits |= exponent << np.uint32(7)
        bits |= h & np.uint32(0x7F)
        out[start:end] = bits
    return out


def layout(layers):
    """(name, shape, paddle parameter name) in PaddleNLP LlamaForCausalLM state_dict order."""
    linear = 0
    items = [("llama.embed_tokens.weight", (VOCAB, HIDDEN), "embedding_0.w_0")]
    for i in range(layers):
        p = f"llama.layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            items.append((p + f"self_attn.{proj}.weight", (HIDDEN, HIDDEN), f"linear_{linear}.w_0"))
            linear += 1
        items.append((p + "mlp.gate_up_fused_proj.weight", (HIDDEN, 2 * FFN), f"linear_{linear}.w_0"))
        items.append((p + "mlp.down_proj.weight", (FFN, HIDDEN), f"linear_{linear + 1}.w_0"))
        linear += 2
        items.append((p + "input_layernorm.weight", (HIDDEN,), f"llama_rms_norm_{2 * i}.w_0"))
        items.append((p + "post_attention_layernorm.weight", (HIDDEN,), f"llama_rms_norm_{2 * i + 1}.w_0"))
    items.append(("llama.norm.weight", (HIDDEN,), f"llama_rms_norm_{2 * layers}.w_0"))
    items.append(("lm_head.weight", (HIDDEN, VOCAB), "llama_lm_head_0.w_0"))
    return items


def config(layers):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "num_hidden_layers": layers,
        "vocab_size": VOCAB,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": False,
        "fuse_attention_qkv": False,
        "fuse_attention_ffn": True,
        "tensor_parallel_degree": 1,
        "dtype": "bfloat16",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--layers", type=int, default=5)
    args = ap.parse_args()

    items = layout(args.layers)
    total = sum(int(np.prod(shape)) * 2 for _, shape, _ in items)
    parent = os.path.dirname(os.path.abspath(args.out_dir))
    os.makedirs(parent, exist_ok=True)
    free = shutil.disk_usage(parent).free
    if free < total + (1 << 30):
        sys.exit(f"make_llama_pd: {total / 1e9:.2f} GB needed in {parent}, only {free / 1e9:.2f} GB free")

    tmp = args.out_dir.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    paddle.set_device("cpu")
    state = {}
    for seed, (name, shape, param_name) in enumerate(items):
        n = int(np.prod(shape))
        if len(shape) == 1:
            bits = bf16_pattern(n, seed, 126, 2)
        else:
            bits = bf16_pattern(n, seed, 116, 8)
        # A uint16 ndarray becomes a bfloat16 tensor, the way Paddle itself round-trips bf16.
        t = paddle.to_tensor(bits.reshape(shape))
        del bits
        assert t.dtype == paddle.bfloat16, t.dtype
        t.name = param_name
        state[name] = t
    paddle.save(state, os.path.join(tmp, "model_state.pdparams"))
    del state
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config(args.layers), f, indent=2)
        f.write("\n")
    shutil.rmtree(args.out_dir, ignore_errors=True)
    os.rename(tmp, args.out_dir)
    size = os.path.getsize(os.path.join(args.out_dir, "model_state.pdparams"))
    print(f"{args.out_dir}: {len(items)} bf16 tensors, {args.layers} layers, "
          f"{total / 1e9:.2f} GB of tensor data, file {size / 1e9:.2f} GB, paddle {paddle.__version__}")


if __name__ == "__main__":
    main()
