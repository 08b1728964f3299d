#!/usr/bin/env python3
"""Checks that two checkpoints hold the same tensors, for the hf2mcore / mcore2hf and
hf2paddle / paddle2hf benchmarks (tests/bench/hf2mcore.sh, tests/bench/paddle_hf.sh).

    hf_compare.py hf A B          two Hugging Face directories
    hf_compare.py megatron A B    two Megatron-LM checkpoint roots (--ckpt-format torch)
    hf_compare.py paddle A B      two PaddleNLP checkpoint directories

hf: the same tensor names (over all *.safetensors files of each directory, however they
are sharded), and per tensor the same dtype, shape and bytes, read from the safetensors
headers and data directly (no framework needed); config.json equal in the fields that
define the model (model_type, sizes, head counts, vocabulary, norm epsilon, RoPE base,
tie_word_embeddings) where both have them.

megatron: the same tracker text and mp_rank_* directories (expert-parallel ones too); in every rank file the same
top-level entries but `args` (each tool records its own run: Megatron's saver all of
Megatron's ~500 arguments, ckptconv what Megatron reads to resume), which are compared in
the fields that define the layout and the model (and the experts, when there are any); `model` / `model{i}` with the same keys
in the same order and every tensor bit-equal (tests/bench/reshard_compare.py's rules).
Needs torch; Megatron's classes in args are read as stand-ins (megatron_ckpt.py), so Megatron
need not be installed. (Megatron's converter records bf16 False and params_dtype float32
for the bf16 weights it writes, so the dtype fields are not compared.)

paddle: the same model_state*.pdparams files; in each, read with pickle (numpy only), the
same structured names in the same order and every array with the same dtype, shape and bytes
(paddle.save writes a tensor as an array or a (variable name, array) pair; the variable names
and the StructuredToParameterName@@ table are each writer's own numbering, not compared);
config.json equal in the model's sizes.

Exits 1 with the first difference; else prints one line: what was compared.
"""

import json
import mmap
import os
import pickle
import struct
import sys

CONFIG_FIELDS = ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps", "rope_theta",
                 "tie_word_embeddings")
ARGS_FIELDS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "num_layers", "hidden_size",
               "ffn_hidden_size", "num_attention_heads", "num_query_groups", "group_query_attention",
               "kv_channels", "swiglu", "normalization", "untie_embeddings_and_output_weights",
               "padded_vocab_size", "add_bias_linear", "position_embedding_type")
# compared when either side has experts (a dense model's defaults differ from tool to tool)
MOE_ARGS_FIELDS = ("num_experts", "expert_model_parallel_size", "moe_router_topk", "moe_ffn_hidden_size")


class Differ(Exception):
    pass


# ------------------------------------------------------------------------ Hugging Face

def safetensors_index(d):
    """{name: (file, dtype, shape, begin, end)} over every *.safetensors file of d."""
    out = {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".safetensors"):
            continue
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
        base = 8 + n
        for name, h in header.items():
            if name == "__metadata__":
                continue
            if name in out:
                raise Differ(f"{d}: {name} in two files")
            b, e = h["data_offsets"]
            out[name] = (p, h["dtype"], tuple(h["shape"]), base + b, base + e)
    if not out:
        raise Differ(f"{d}: no safetensors files")
    return out


def compare_hf(a, b):
    ia, ib = safetensors_index(a), safetensors_index(b)
    if set(ia) != set(ib):
        raise Differ(f"tensors only in {a}: {sorted(set(ia) - set(ib))[:5]}, only in {b}: "
                     f"{sorted(set(ib) - set(ia))[:5]}")
    maps = {}

    def view(path):
        if path not in maps:
            with open(path, "rb") as fh:
                maps[path] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return maps[path]

    nbytes = 0
    for name in sorted(ia):
        pa, da, sa, ba, ea = ia[name]
        pb, db, sb, bb, eb = ib[name]
        if (da, sa) != (db, sb):
            raise Differ(f"{name}: {da} {list(sa)} vs {db} {list(sb)}")
        if view(pa)[ba:ea] != view(pb)[bb:eb]:
            raise Differ(f"{name}: {da} {list(sa)}: the bytes differ")
        nbytes += ea - ba
    for m in maps.values():
        m.close()
    ca, cb = (json.load(open(os.path.join(d, "config.json"), encoding="utf-8")) for d in (a, b))
    diff = [k for k in CONFIG_FIELDS if k in ca and k in cb and ca[k] != cb[k]]
    if diff:
        raise Differ(f"config.json differs in {[(k, ca[k], cb[k]) for k in diff]}")
    both = [k for k in CONFIG_FIELDS if k in ca and k in cb]
    return (f"same model: {len(ia)} tensors ({nbytes / 1e9:.2f} GB) bit-equal, config.json equal in "
            f"{len(both)} fields ({', '.join(both)})")


# ------------------------------------------------------------------------ Megatron

def compare_megatron(a, b):
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import megatron_ckpt as mc
    import reshard_compare as rc

    ta, sa, fa = mc.rank_dirs(a)
    tb, sb, fb = mc.rank_dirs(b)
    if ta != tb:
        raise Differ(f"latest_checkpointed_iteration.txt: {ta!r} vs {tb!r}")
    if sa != sb or sorted(fa) != sorted(fb):
        raise Differ(f"rank directories: {sa} {sorted(fa)} vs {sb} {sorted(fb)}")
    n_tensors, fields, moe = 0, ARGS_FIELDS, False
    for key in sorted(fa):
        rel = os.path.relpath(fa[key], a)
        da, db = mc.load(fa[key]), mc.load(fb[key])
        args = [d.pop("args", None) for d in (da, db)]
        moe = any(getattr(x, "num_experts", None) for x in args)
        fields = ARGS_FIELDS + (MOE_ARGS_FIELDS if moe else ())
        for f in fields:
            va, vb = (getattr(x, f, None) for x in args)
            if va != vb:
                raise Differ(f"{rel}: args.{f}: {va!r} vs {vb!r}")
        try:
            rc.same(da, db, rel)
        except rc.Differ as e:
            raise Differ(str(e)) from None
        n_tensors += sum(1 for k, m in da.items() if k.startswith("model") for v in m.values()
                         if isinstance(v, torch.Tensor))
        del da, db
    return (f"same checkpoint: {len(fa)} rank files, {n_tensors} tensors bit-equal, keys in the same order, "
            f"args equal in {len(fields)} fields (layout and model{', experts' if moe else ''})")


# ------------------------------------------------------------------------ PaddleNLP

PADDLE_CONFIG_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                        "num_key_value_heads", "vocab_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings")


def paddle_arrays(path):
    import numpy as np

    with open(path, "rb") as f:
        obj = pickle.load(f)
    out = []
    for k, v in obj.items():
        if k == "StructuredToParameterName@@":
            continue
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], np.ndarray):
            v = v[1]
        if not isinstance(v, np.ndarray):
            raise Differ(f"{path}: {k} is a {type(v).__name__}, not an array")
        out.append((k, v))
    return out


def compare_paddle(a, b):
    files = [sorted(f for f in os.listdir(d) if f.startswith("model_state") and f.endswith(".pdparams"))
             for d in (a, b)]
    if files[0] != files[1] or not files[0]:
        raise Differ(f"model files {files[0]} vs {files[1]}")
    n = nbytes = 0
    for f in files[0]:
        x, y = paddle_arrays(os.path.join(a, f)), paddle_arrays(os.path.join(b, f))
        kx, ky = [k for k, _ in x], [k for k, _ in y]
        if kx != ky:
            if set(kx) != set(ky):
                raise Differ(f"{f}: only in the first {sorted(set(kx) - set(ky))[:5]}, only in the second "
                             f"{sorted(set(ky) - set(kx))[:5]}")
            i = next(i for i, (p, q) in enumerate(zip(kx, ky)) if p != q)
            raise Differ(f"{f}: same names in another order (position {i}: {kx[i]} vs {ky[i]})")
        for (k, p), (_, q) in zip(x, y):
            if p.dtype != q.dtype or p.shape != q.shape:
                raise Differ(f"{f}: {k}: {p.dtype} {list(p.shape)} vs {q.dtype} {list(q.shape)}")
            if p.tobytes() != q.tobytes():
                raise Differ(f"{f}: {k}: {p.dtype} {list(p.shape)}: the bytes differ")
            n += 1
            nbytes += p.nbytes
        del x, y
    ca, cb = (json.load(open(os.path.join(d, "config.json"), encoding="utf-8")) for d in (a, b))
    diff = [k for k in PADDLE_CONFIG_FIELDS if k in ca and k in cb and ca[k] != cb[k]]
    if diff:
        raise Differ(f"config.json differs in {[(k, ca[k], cb[k]) for k in diff]}")
    both = [k for k in PADDLE_CONFIG_FIELDS if k in ca and k in cb]
    return (f"same model: {len(files[0])} files, {n} tensors ({nbytes / 1e9:.2f} GB) bit-equal in the same order, "
            f"config.json equal in {len(both)} fields")


def main():
    kinds = {"hf": compare_hf, "megatron": compare_megatron, "paddle": compare_paddle}
    if len(sys.argv) != 4 or sys.argv[1] not in kinds:
        sys.exit(__doc__.split("\n\n")[1])
    kind, a, b = sys.argv[1:]
    try:
        msg = kinds[kind](a, b)
    except Differ as e:
        print(f"hf_compare: {a} and {b} differ: {e}", file=sys.stderr)
        sys.exit(1)
    print(msg)


if __name__ == "__main__":
    main()
