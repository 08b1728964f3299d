#!/usr/bin/env python3
"""Checks the MoE benchmark's output (tests/bench/moe.sh): ckptconv's `hf2mcore --tp 1 --ep N
--transformer-impl local` of an FP8 block-scaled DeepSeek-V3 Hugging Face directory against
numpy's own reading of the input, every tensor of every rank file.

    fp8_check.py HF_DIR MEGATRON_ROOT EP

An FP8 weight's expected value is DeepSeek's dequantisation: each E4M3 byte's value times the
float32 scale of its 128 x 128 block, the float32 product rounded to nearest-even bfloat16 (its
fp8_cast_bf16.py). Names follow Megatron-LM's local layer spec: q_a_proj -> linear_q_down_proj,
q_a_layernorm -> q_layernorm, q_b_proj -> linear_q_up_proj, kv_a_proj_with_mqa ->
linear_kv_down_proj, kv_a_layernorm -> kv_layernorm, kv_b_proj -> linear_kv_up_proj, o_proj ->
linear_proj, [gate_proj; up_proj] -> linear_fc1, down_proj -> linear_fc2, the router
(mlp.gate.weight, e_score_correction_bias) -> mlp.router.weight / expert_bias, routed expert
ep_rank * (experts / EP) + i -> local_experts.i. The rank directory mp_rank_00_PPP_EEE holds
pipeline stage PPP's layers (layers split evenly over the stages) and expert rank EEE's experts.
Every tensor of a rank file must be expected and every expected tensor present, equal in
shape and bit for bit (bf16), or in value (the float32 expert bias). Needs torch (Debian's 1.13
reads what ckptconv writes) and numpy; reads the safetensors directly.

Exits 1 naming the first difference; else prints one line: what was compared.
"""

import json
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ckpt  # noqa: E402
from make_hf_bench import to_bf16_bits  # noqa: E402

BLOCK = 128
DTYPES = {"F8_E4M3": np.uint8, "BF16": np.uint16, "F32": np.float32}


def e4m3_table():
    """float32 value of every E4M3 byte (bias 7, no infinities, 0x7F/0xFF NaN)."""
    v = np.arange(256, dtype=np.int32)
    sign = np.where(v & 0x80, -1.0, 1.0)
    exp, man = (v >> 3) & 0xF, v & 0x7
    val = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1 + man / 8.0) * 2.0 ** (exp - 7))
    val = np.where((v & 0x7F) == 0x7F, np.nan, val)
    return (sign * val).astype(np.float32)


E4M3 = e4m3_table()


class HF:
    def __init__(self, d):
        self.d = d
        with open(os.path.join(d, "config.json")) as f:
            self.config = json.load(f)
        self.where = {}
        for name in sorted(os.listdir(d)):
            if not name.endswith(".safetensors"):
                continue
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(n))
            header.pop("__metadata__", None)
            for k, v in header.items():
                self.where[k] = (path, 8 + n, v)

    def raw(self, name):
        path, base, v = self.where[name]
        a, b = v["data_offsets"]
        return np.memmap(path, dtype=DTYPES[v["dtype"]], mode="r", offset=base + a,
                         shape=tuple(v["shape"])), v["dtype"]

    def bf16(self, name):
        """bf16 bits of a tensor as ckptconv should have written it (FP8 dequantised)."""
        x, dtype = self.raw(name)
        if dtype == "BF16":
            return np.asarray(x)
        if dtype != "F8_E4M3":
            raise SystemExit(f"{name}: {dtype}, not a bf16 or FP8 weight")
        s, _ = self.raw(name + "_scale_inv")
        rows, cols = x.shape
        scale = np.repeat(np.repeat(np.asarray(s), BLOCK, 0), BLOCK, 1)[:rows, :cols]
        return to_bf16_bits(E4M3[np.asarray(x)] * scale)


def expected(hf, layers, experts_per_rank, ep_rank):
    """{megatron name: thunk of its expected array} for one stage's layers and one expert rank."""
    out = {}
    dense = hf.config.get("first_k_dense_replace", 0)

    def put(name, hf_name, kind="bf16"):
        out[name] = (lambda: hf.bf16(hf_name)) if kind == "bf16" else (lambda: np.asarray(hf.raw(hf_name)[0]))

    def fc1(name, gate, up):
        out[name] = lambda: np.concatenate([hf.bf16(gate), hf.bf16(up)], 0)

    for g in layers:
        m, h = f"decoder.layers.{g}.", f"model.layers.{g}."
        put(m + "input_layernorm.weight", h + "input_layernorm.weight")
        for a, b in (("linear_q_down_proj", "q_a_proj"), ("linear_q_up_proj", "q_b_proj"),
                     ("linear_kv_down_proj", "kv_a_proj_with_mqa"), ("linear_kv_up_proj", "kv_b_proj"),
                     ("linear_proj", "o_proj"), ("q_layernorm", "q_a_layernorm"), ("kv_layernorm", "kv_a_layernorm")):
            put(f"{m}self_attention.{a}.weight", f"{h}self_attn.{b}.weight")
        put(m + "pre_mlp_layernorm.weight", h + "post_attention_layernorm.weight")
        if g < dense:
            fc1(m + "mlp.linear_fc1.weight", h + "mlp.gate_proj.weight", h + "mlp.up_proj.weight")
            put(m + "mlp.linear_fc2.weight", h + "mlp.down_proj.weight")
            continue
        put(m + "mlp.router.weight", h + "mlp.gate.weight")
        put(m + "mlp.router.expert_bias", h + "mlp.gate.e_score_correction_bias", "f32")
        for i in range(experts_per_rank):
            e = ep_rank * experts_per_rank + i
            q, p = f"{m}mlp.experts.local_experts.{i}.", f"{h}mlp.experts.{e}."
            fc1(q + "linear_fc1.weight", p + "gate_proj.weight", p + "up_proj.weight")
            put(q + "linear_fc2.weight", p + "down_proj.weight")
        fc1(m + "mlp.shared_experts.linear_fc1.weight", h + "mlp.shared_experts.gate_proj.weight",
            h + "mlp.shared_experts.up_proj.weight")
        put(m + "mlp.shared_experts.linear_fc2.weight", h + "mlp.shared_experts.down_proj.weight")
    return out


def main():
    import torch
    hf_dir, root, ep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    hf = HF(hf_dir)
    c = hf.config
    n_layers, n_exp = c["num_hidden_layers"], c["n_routed_experts"]
    _, _, files = megatron_ckpt.rank_dirs(root)
    names = {}
    for d in files:
        m = re.fullmatch(r"mp_rank_00_(\d{3})_(\d{3})", d)
        if not m:
            raise SystemExit(f"{root}: {d}: not mp_rank_00_PPP_EEE (TP 1, PP > 1, EP > 1 expected)")
        names[d] = (int(m.group(1)), int(m.group(2)))
    pp = max(p for p, _ in names.values()) + 1
    if sorted(names.values()) != [(p, e) for p in range(pp) for e in range(ep)]:
        raise SystemExit(f"{root}: rank directories {sorted(files)} are not PP {pp} x EP {ep}")
    per_stage = n_layers // pp
    checked = elements = 0
    for d, (p, e) in sorted(names.items()):
        sd = megatron_ckpt.load(files[d])["model"]
        layers = range(p * per_stage, (p + 1) * per_stage)
        want = expected(hf, layers, n_exp // ep, e)
        if p == 0:
            want["embedding.word_embeddings.weight"] = lambda: hf.bf16("model.embed_tokens.weight")
        if p == pp - 1:
            want["decoder.final_layernorm.weight"] = lambda: hf.bf16("model.norm.weight")
            want["output_layer.weight"] = lambda: hf.bf16("lm_head.weight")
        local = {k: v for k, v in sd.items() if not k.endswith("._extra_state")}
        for k in local:
            g = re.match(r"decoder\.layers\.(\d+)\.", k)
            key = f"decoder.layers.{int(g.group(1)) + p * per_stage}." + k[g.end():] if g else k
            if key not in want:
                raise SystemExit(f"{d}: {k}: not a tensor of this rank")
            t = local[k]
            exp = want.pop(key)()
            if key.endswith("expert_bias"):
                got = t.float().numpy()
                same = got.shape == exp.shape and np.array_equal(got, exp.astype(np.float32))
            else:
                if t.dtype != torch.bfloat16:
                    raise SystemExit(f"{d}: {k}: {t.dtype}, not bfloat16")
                got = t.contiguous().view(torch.int16).numpy().view(np.uint16)
                same = got.shape == exp.shape and np.array_equal(got, exp)
            if not same:
                raise SystemExit(f"{d}: {k}: differs from the dequantised {key} of {hf_dir}")
            checked += 1
            elements += got.size
        if want:
            raise SystemExit(f"{d}: missing {sorted(want)[:3]}")
        del sd
    print(f"{len(names)} rank files (PP {pp} x EP {ep}), {checked} tensors, {elements / 1e9:.2f} G elements: "
          "all equal to numpy's dequantisation of the input")


if __name__ == "__main__":
    main()
