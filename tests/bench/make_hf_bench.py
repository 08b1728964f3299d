"""Writes a LLaMA-shaped Hugging Face model directory in bfloat16, the input of the
hf2mcore / mcore2hf and hf2paddle / paddle2hf benchmarks (tests/bench/hf2mcore.sh,
tests/bench/paddle_hf.sh), or with --experts a Mixtral-shaped one (tests/bench/moe_mixtral.sh).

Run with any Python that has numpy (the venv's):

    .venv/bin/python tests/bench/make_hf_bench.py OUT_DIR [--layers N] [--hidden H] ...

OUT_DIR gets what `save_pretrained` of a LlamaForCausalLM in bfloat16 writes, plus a
tokenizer Megatron-LM's loader can read:

- model-0000S-of-0000N.safetensors shards (at most --shard-size bytes each, tensors in
  save_pretrained's order: embed_tokens, the layers, norm, lm_head) and
  model.safetensors.index.json;
- config.json (model_type llama, LlamaForCausalLM, untied lm_head, transformers 4.46.3's
  fields) and generation_config.json;
- tokenizer.json (a word-level tokenizer of --vocab tokens: <unk>, <s>, </s>, t3, t4, ...)
  and tokenizer_config.json (PreTrainedTokenizerFast): Megatron-LM's llama_mistral loader
  takes the true vocabulary size from the tokenizer (AutoTokenizer), and the vocabulary is a
  multiple of 128 x TP so that no tool pads it (Megatron pads by repeating the last row,
  ckptconv with zeros).

Default shape: hidden 2048, intermediate 5632, 16 heads in 4 KV groups (head_dim 128),
12 layers, vocabulary 32000: 672M parameters, 1.34 GB of bfloat16. Values: numpy's
default_rng(SEED), weights 0.02*N(0,1), norms 1+0.1*N(0,1), rounded to nearest-even bf16.
With --experts N every MLP is a mixture of N experts as MixtralForCausalLM saves it
(transformers 4.x names, which the released Mixtral checkpoints use):
block_sparse_moe.gate.weight [N, hidden] and block_sparse_moe.experts.E.w1/w3 [--ffn, hidden],
w2 [hidden, --ffn]; config.json is a MixtralConfig's (num_local_experts N,
num_experts_per_tok --top-k, rope_theta 1e6, no sliding window).
The safetensors files are written directly (header + raw bytes), so neither torch nor the
safetensors package is needed. The directory is written under OUT_DIR.tmp and renamed into
place, so an interrupted run never leaves a half-written input behind.
"""

import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

CHUNK_ROWS = 1024


def to_bf16_bits(x):
    """Round-to-nearest-even bf16 bit patterns (uint16) of a finite float32 array."""
    u = x.view(np.uint32)
    r = (u >> np.uint32(16)) & np.uint32(1)
    r += np.uint32(0x7FFF)
    r += u
    r >>= np.uint32(16)
    return r.astype(np.uint16)


def layout(a):
    """[(name, shape)] in the order save_pretrained writes a LlamaForCausalLM."""
    head_dim = a.hidden // a.heads
    kv = head_dim * a.kv_heads
    items = [("model.embed_tokens.weight", (a.vocab, a.hidden))]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        items += [(p + "self_attn.q_proj.weight", (a.hidden, a.hidden)),
                  (p + "self_attn.k_proj.weight", (kv, a.hidden)),
                  (p + "self_attn.v_proj.weight", (kv, a.hidden)),
                  (p + "self_attn.o_proj.weight", (a.hidden, a.hidden))]
        if a.experts:
            items.append((p + "block_sparse_moe.gate.weight", (a.experts, a.hidden)))
            for e in range(a.experts):
                q = f"{p}block_sparse_moe.experts.{e}."
                items += [(q + "w1.weight", (a.ffn, a.hidden)), (q + "w2.weight", (a.hidden, a.ffn)),
                          (q + "w3.weight", (a.ffn, a.hidden))]
        else:
            items += [(p + "mlp.gate_proj.weight", (a.ffn, a.hidden)),
                      (p + "mlp.up_proj.weight", (a.ffn, a.hidden)),
                      (p + "mlp.down_proj.weight", (a.hidden, a.ffn))]
        items += [(p + "input_layernorm.weight", (a.hidden,)),
                  (p + "post_attention_layernorm.weight", (a.hidden,))]
    items += [("model.norm.weight", (a.hidden,)), ("lm_head.weight", (a.vocab, a.hidden))]
    return items


def values(rng, shape):
    """bf16 bits of one tensor, drawn in row blocks so the float32 intermediate stays small."""
    if len(shape) == 1:
        w = rng.standard_normal(shape, dtype=np.float32)
        w *= np.float32(0.1)
        w += np.float32(1.0)
        return to_bf16_bits(w)
    out = np.empty(shape, dtype=np.uint16)
    for r in range(0, shape[0], CHUNK_ROWS):
        n = min(CHUNK_ROWS, shape[0] - r)
        w = rng.standard_normal((n, shape[1]), dtype=np.float32)
        w *= np.float32(0.02)
        out[r:r + n] = to_bf16_bits(w)
    return out


def shards(items, limit):
    """Tensors grouped into shards of at most `limit` bytes (one tensor may exceed it)."""
    groups, cur, size = [], [], 0
    for name, shape in items:
        n = int(np.prod(shape)) * 2
        if cur and size + n > limit:
            groups.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += n
    groups.append(cur)
    return groups


def write_shard(path, rng, group):
    header, off = {}, 0
    for name, shape in group:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, shape in group:
            f.write(values(rng, shape).tobytes())
    return off


def config(a):
    return mixtral_config(a) if a.experts else llama_config(a)


def mixtral_config(a):
    c = llama_config(a)
    for key in ("attention_bias", "mlp_bias", "pretraining_tp", "rope_scaling"):
        del c[key]
    c.update(architectures=["MixtralForCausalLM"], model_type="mixtral", num_local_experts=a.experts,
             num_experts_per_tok=a.top_k, output_router_logits=False, rope_theta=1000000.0,
             router_aux_loss_coef=0.02, router_jitter_noise=0.0, sliding_window=None)
    return c


def llama_config(a):
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "head_dim": a.hidden // a.heads,
        "hidden_act": "silu",
        "hidden_size": a.hidden,
        "initializer_range": 0.02,
        "intermediate_size": a.ffn,
        "max_position_embeddings": 4096,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": a.heads,
        "num_hidden_layers": a.layers,
        "num_key_value_heads": a.kv_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.46.3",
        "use_cache": True,
        "vocab_size": a.vocab,
    }


def tokenizer(a):
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"t{i}": i for i in range(3, a.vocab)})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}
                         for t, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }


TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                    "unk_token": "<unk>", "model_max_length": 4096}
GENERATION_CONFIG = {"_from_model_config": True, "bos_token_id": 1, "eos_token_id": 2,
                     "transformers_version": "4.46.3"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--ffn", type=int, default=5632, help="intermediate size")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--experts", type=int, default=0, help="Mixtral-shaped: experts per layer")
    ap.add_argument("--top-k", type=int, default=2, help="with --experts: experts per token")
    ap.add_argument("--shard-size", type=int, default=1 << 30, help="bytes per safetensors shard at most")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.hidden % a.heads or a.heads % a.kv_heads or a.vocab < 4:
        sys.exit("make_hf_bench: hidden must divide by heads, heads by kv heads")

    items = layout(a)
    total = sum(int(np.prod(s)) * 2 for _, s in items)
    out = os.path.abspath(a.out_dir)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    free = shutil.disk_usage(parent).free
    if free < total + (1 << 30):
        sys.exit(f"make_hf_bench: {total / 1e9:.2f} GB needed in {parent}, only {free / 1e9:.2f} GB free")

    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    rng = np.random.default_rng(a.seed)
    groups = shards(items, a.shard_size)
    weight_map = {}
    for i, group in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        write_shard(os.path.join(tmp, fname), rng, group)
        weight_map.update({name: fname for name, _ in group})
    files = (("model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map}),
             ("config.json", config(a)), ("generation_config.json", GENERATION_CONFIG),
             ("tokenizer.json", tokenizer(a)), ("tokenizer_config.json", TOKENIZER_CONFIG))
    for name, obj in files:
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=name != "tokenizer.json")
            f.write("\n")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    params = sum(int(np.prod(s)) for _, s in items)
    shape = f"Mixtral-shaped ({a.experts} experts of ffn {a.ffn})" if a.experts else "LLaMA-shaped"
    print(f"{out}: {shape}, {a.layers} layers, hidden {a.hidden}, {params / 1e6:.1f}M parameters, "
          f"{total / 1e9:.2f} GB of bfloat16 in {len(groups)} shards, numpy {np.__version__}")


if __name__ == "__main__":
    main()
