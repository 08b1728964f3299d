"""Writes a DeepSeek-V3-shaped Hugging Face model directory as DeepSeek released its weights:
FP8 (E4M3) linear weights, each with a float32 `weight_scale_inv` of 128 x 128 blocks, the
input of the MoE benchmark (tests/bench/moe.sh).

    .venv/bin/python tests/bench/make_deepseek_bench.py OUT_DIR [--layers N] [--dense N] ...

Default shape: the released model's widths (hidden 7168; MLA with 128 heads, q_lora_rank
1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128; dense
MLP 18432; 256 routed experts of 2048 in 8 groups, top-8 of the best 4 groups, one shared
expert), 2 layers of which the first is dense (first_k_dense_replace 1), vocabulary 1024
(the embeddings are not what the benchmark measures): 12.1 GB, 11.3 GB of it the one MoE
layer's experts.

As in the release:
- FP8: every projection of the attention (q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj,
  o_proj) and of the MLPs (dense, routed and shared experts' gate_proj, up_proj, down_proj);
  their `weight_scale_inv` [ceil(rows / 128), ceil(cols / 128)] float32;
- bfloat16: embed_tokens, lm_head, the norms, the router's mlp.gate.weight;
- float32: mlp.gate.e_score_correction_bias;
- config.json: the released one's keys (its own DeepseekV3Config of transformers 4.33.1 with
  auto_map, scoring_func, topk_method noaux_tc, seq_aux, ep_size), quantization_config {"quant_method": "fp8", "fmt":
  "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}, YaRN RoPE as
  released (factor 40 over 4096 positions, mscale = mscale_all_dim = 1), no MTP layer
  (num_nextn_predict_layers 0).
Values: numpy's default_rng(SEED); FP8 bytes uniform over the finite E4M3 codes (0x7F and
0xFF, its NaNs, are moved to their neighbours), scales 2^-12..2^-8, bf16 weights 0.02*N(0,1),
norms 1+0.1*N(0,1), the expert bias 0.01*N(0,1). Shards of at most --shard-size bytes
(model-0000S-of-0000N.safetensors + model.safetensors.index.json), written directly (header +
raw bytes), under OUT_DIR.tmp and renamed into place.
"""

import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

from make_hf_bench import to_bf16_bits

SEED = 20261128
BLOCK = 128
CHUNK = 1 << 26


def args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dense", type=int, default=1, help="first_k_dense_replace")
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--heads", type=int, default=128)
    p.add_argument("--q-lora", type=int, default=1536)
    p.add_argument("--kv-lora", type=int, default=512)
    p.add_argument("--nope", type=int, default=128)
    p.add_argument("--rope", type=int, default=64)
    p.add_argument("--v-head", type=int, default=128)
    p.add_argument("--ffn", type=int, default=18432, help="the dense layers' intermediate_size")
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--expert-ffn", type=int, default=2048)
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--shard-size", type=int, default=4 << 30)
    return p.parse_args()


def layout(a):
    """[(name, dtype, shape)] in the order of the released files; a FP8 weight is followed by
    its scale."""
    def fp8(name, rows, cols):
        return [(name, "F8_E4M3", (rows, cols)),
                (name + "_scale_inv", "F32", (-(-rows // BLOCK), -(-cols // BLOCK)))]

    def mlp(p, ffn):
        return (fp8(p + "down_proj.weight", a.hidden, ffn) + fp8(p + "gate_proj.weight", ffn, a.hidden)
                + fp8(p + "up_proj.weight", ffn, a.hidden))

    items = [("model.embed_tokens.weight", "BF16", (a.vocab, a.hidden))]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        items.append((p + "input_layernorm.weight", "BF16", (a.hidden,)))
        if i < a.dense:
            items += mlp(p + "mlp.", a.ffn)
        else:
            for e in range(a.experts):
                items += mlp(f"{p}mlp.experts.{e}.", a.expert_ffn)
            items += [(p + "mlp.gate.e_score_correction_bias", "F32", (a.experts,)),
                      (p + "mlp.gate.weight", "BF16", (a.experts, a.hidden))]
            items += mlp(p + "mlp.shared_experts.", a.expert_ffn)
        items.append((p + "post_attention_layernorm.weight", "BF16", (a.hidden,)))
        s = p + "self_attn."
        items += fp8(s + "kv_a_proj_with_mqa.weight", a.kv_lora + a.rope, a.hidden)
        items.append((s + "kv_a_layernorm.weight", "BF16", (a.kv_lora,)))
        items += fp8(s + "kv_b_proj.weight", a.heads * (a.nope + a.v_head), a.kv_lora)
        items += fp8(s + "o_proj.weight", a.hidden, a.heads * a.v_head)
        items += fp8(s + "q_a_proj.weight", a.q_lora, a.hidden)
        items.append((s + "q_a_layernorm.weight", "BF16", (a.q_lora,)))
        items += fp8(s + "q_b_proj.weight", a.heads * (a.nope + a.rope), a.q_lora)
    items += [("model.norm.weight", "BF16", (a.hidden,)), ("lm_head.weight", "BF16", (a.vocab, a.hidden))]
    return items


ITEMSIZE = {"F8_E4M3": 1, "BF16": 2, "F32": 4}


def nbytes(dtype, shape):
    return int(np.prod(shape)) * ITEMSIZE[dtype]


def chunks(rng, name, dtype, shape):
    """The tensor's bytes, a chunk at a time, so that no float32 copy of a 1 GB tensor is made."""
    n = int(np.prod(shape))
    if dtype == "F8_E4M3":
        for at in range(0, n, CHUNK):
            b = rng.integers(0, 256, min(CHUNK, n - at), dtype=np.uint8)
            b[(b & 0x7F) == 0x7F] ^= 1
            yield b.tobytes()
    elif dtype == "F32" and name.endswith("_scale_inv"):
        yield np.exp2(rng.uniform(-12, -8, n)).astype(np.float32).tobytes()
    elif dtype == "F32":
        yield (rng.standard_normal(n, dtype=np.float32) * np.float32(0.01)).tobytes()
    elif len(shape) == 1:
        yield to_bf16_bits(rng.standard_normal(n, dtype=np.float32) * np.float32(0.1) + np.float32(1)).tobytes()
    else:
        for at in range(0, n, CHUNK):
            w = rng.standard_normal(min(CHUNK, n - at), dtype=np.float32)
            w *= np.float32(0.02)
            yield to_bf16_bits(w).tobytes()


def shards(items, limit):
    groups, cur, size = [], [], 0
    for item in items:
        n = nbytes(item[1], item[2])
        if cur and size + n > limit and not item[0].endswith("_scale_inv"):
            groups.append(cur)
            cur, size = [], 0
        cur.append(item)
        size += n
    groups.append(cur)
    return groups


def write_shard(path, rng, group):
    header, off = {}, 0
    for name, dtype, shape in group:
        n = nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, dtype, shape in group:
            for b in chunks(rng, name, dtype, shape):
                f.write(b)
    return off


def config(a):
    return {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
                     "AutoModel": "modeling_deepseek.DeepseekV3Model",
                     "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"},
        "attention_bias": False, "attention_dropout": 0.0, "aux_loss_alpha": 0.001, "ep_size": 1, "bos_token_id": 0, "eos_token_id": 1,
        "first_k_dense_replace": a.dense, "hidden_act": "silu", "hidden_size": a.hidden,
        "initializer_range": 0.02, "intermediate_size": a.ffn, "kv_lora_rank": a.kv_lora,
        "max_position_embeddings": 163840, "moe_intermediate_size": a.expert_ffn, "moe_layer_freq": 1,
        "n_group": a.groups, "n_routed_experts": a.experts, "n_shared_experts": 1, "norm_topk_prob": True,
        "num_attention_heads": a.heads, "num_experts_per_tok": a.top_k, "num_hidden_layers": a.layers,
        "num_key_value_heads": a.heads, "num_nextn_predict_layers": 0, "q_lora_rank": a.q_lora,
        "qk_nope_head_dim": a.nope, "qk_rope_head_dim": a.rope,
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "weight_block_size": [BLOCK, BLOCK]},
        "rms_norm_eps": 1e-06,
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 4096, "type": "yarn"},
        "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": True, "tie_word_embeddings": False,
        "topk_group": max(1, a.groups // 2), "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
        "transformers_version": "4.33.1", "use_cache": True, "v_head_dim": a.v_head, "vocab_size": a.vocab,
    }


def main():
    a = args()
    if a.dense > a.layers or a.experts % a.groups or a.top_k > a.experts:
        sys.exit("make_deepseek_bench.py: --dense at most --layers, --groups dividing --experts, --top-k at most --experts")
    tmp = a.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    rng = np.random.default_rng(SEED)
    groups = shards(layout(a), a.shard_size)
    weight_map, total = {}, 0
    for i, group in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        total += write_shard(os.path.join(tmp, name), rng, group)
        weight_map.update({t[0]: name for t in group})
    with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config(a), f, indent=2)
    with open(os.path.join(tmp, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 0, "eos_token_id": 1, "transformers_version": "4.33.1"}, f, indent=2)
    shutil.rmtree(a.out, ignore_errors=True)
    os.rename(tmp, a.out)
    print(f"make_deepseek_bench.py: {a.out}: {len(weight_map)} tensors, {total / 1e9:.2f} GB in {len(groups)} shards")


if __name__ == "__main__":
    main()
