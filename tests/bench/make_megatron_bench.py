#!/usr/bin/env python3
"""Writes the input of tests/bench/reshard.sh: a Megatron-LM legacy checkpoint (--ckpt-format
torch) at TP2 PP2, bf16 with optimizer state, >= 2 GB over its four rank files.

    make_megatron_bench.py [OUT] [--template ROOT] [--layers 8] [--hidden 1024] ...

OUT defaults to .bench/megatron_tp2pp2. Runs with Debian's torch (1.13); Megatron is not needed.

Every rank file has the structure of the same rank of a checkpoint Megatron itself wrote
(--template, default testdata/megatron/tp2pp2_bf16_optim: megatron-core 0.16.1, local layer
spec, LLaMA-style: RMSNorm, SwiGLU, GQA, RoPE, untied output layer, no linear biases, bf16,
two AdamW steps), only larger: the template rank file's top-level keys in their order, its
`args` with the model sizes replaced (num_layers, hidden_size, ffn_hidden_size,
num_attention_heads, num_query_groups, kv_channels, vocab_size, padded_vocab_size), its
rng_state, opt_param_scheduler and other entries as they are; the model keys in the
template's order (embedding first on stage 0, per layer the template's layer-0 keys, final
norm and output layer on the last stage, `_extra_state` entries with the template's
values); the optimizer as Megatron's Float16OptimizerWithFloat16Params saves it:
{optimizer: AdamW state_dict, [grad_scaler,] fp32_from_fp16_params}, param groups with the
template's hyper-parameters, parameters numbered in named_parameters() order split into the
weight-decay group and the no-weight-decay group (biases and 1-D tensors), one state entry
({step, exp_avg, exp_avg_sq}, step copied from the template) per parameter, the masters
pickled with the template's tensor attributes (tensor_model_parallel, partition_dim, ...).

Contents are deterministic pseudo-random: each fp32 master from a generator seeded by the
parameter's global name (and TP rank for split parameters; replicated norms are equal on
both TP ranks), the bf16 weight is the master rounded to bf16 (as Megatron keeps them),
moments small random values (exp_avg_sq >= 0). The vocabulary is NullTokenizer-sized:
vocab_size V means V + 1 tokens (EOD), padded to Megatron's multiple of
make_vocab_size_divisible_by x TP. Each rank file is built and saved on its own.

What differs from a file torch 2.x writes: the zip records are torch 1.13's (data.pkl, version,
data/N; no byteorder, .format_version, .storage_alignment, .data/serialization_id), and
args.exit_signal pickles as the global signal.SIGTERM instead of signal.Signals(15).
"""

import argparse
import copy
import hashlib
import os
import sys
from collections import OrderedDict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import megatron_ckpt as mc  # noqa: E402

TP, PP = 2, 2


def seeded(*parts):
    h = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(h[:8], "little") & ((1 << 63) - 1))


def shapes(o, vp):
    """Local (per TP rank) shape of each parameter kind."""
    h, f, nh, ng, d = o.hidden, o.ffn, o.heads, o.groups, o.kv_channels
    return {
        "embedding.word_embeddings.weight": (vp // TP, h),
        "output_layer.weight": (vp // TP, h),
        "self_attention.linear_qkv.weight": ((nh + 2 * ng) * d // TP, h),
        "self_attention.linear_proj.weight": (h, nh * d // TP),
        "mlp.linear_fc1.weight": (2 * f // TP, h),
        "mlp.linear_fc2.weight": (h, f // TP),
        "q_layernorm.weight": (d,),
        "k_layernorm.weight": (d,),
        "norm": (h,),
    }


def local_shape(key, sh):
    for suffix, shape in sh.items():
        if suffix != "norm" and key.endswith(suffix):
            return shape
    if mc.split_kind(key, True) == "rep" and key.endswith(("weight", "layer_norm_weight")):
        return sh["norm"]
    raise SystemExit(f"template key {key}: no size rule in this generator")


def model_keys(t, layers_per_stage):
    """The template rank's key order at the new depth."""
    pre = [k for k in t if mc.layer_of(k) is None and k.startswith("embedding.")]
    post = [k for k in t if mc.layer_of(k) is None and not k.startswith("embedding.")]
    first = min(mc.layer_of(k) for k in t if mc.layer_of(k) is not None)
    layer = [k for k in t if mc.layer_of(k) == first]
    keys = list(pre)
    for i in range(layers_per_stage):
        keys += [mc.with_layer(k, i) for k in layer]
    return keys + post


def make_rank(o, tmpl_sd, tp_rank, pp_rank, vp):
    sh = shapes(o, vp)
    lps = o.layers // PP
    tmodel = tmpl_sd["model"]
    keys = model_keys(tmodel, lps)
    model = OrderedDict()
    masters = {}
    for key in keys:
        tv = tmodel[mc.with_layer(key, 0) if mc.layer_of(key) is not None else key]
        if key.endswith("._extra_state") or not isinstance(tv, torch.Tensor):
            model[key] = copy.deepcopy(tv)
            continue
        layer = mc.layer_of(key)
        gkey = key if layer is None else mc.with_layer(key, layer + pp_rank * lps)
        kind = mc.split_kind(key, True)
        shape = local_shape(key, sh)
        if kind == "rep":
            g = seeded("master", gkey)
            m = 1.0 + 0.02 * torch.randn(shape, generator=g, dtype=torch.float32)
        else:
            g = seeded("master", gkey, tp_rank)
            m = 0.02 * torch.randn(shape, generator=g, dtype=torch.float32)
        masters[key] = m
        model[key] = m.to(tv.dtype)

    # optimizer: the template's wrapper and groups, this rank's parameters
    t_opt = tmpl_sd["optimizer"]
    t_inner, t_masters, t_wrap = mc.split_optimizer(t_opt)
    if t_masters is None:
        raise SystemExit("template: expected a bf16/fp16 optimizer (fp32_from_fp16_params)")
    params = [(k, model[k]) for _, _, k in mc.parameter_names([("model", model)])]
    names_by_group = mc.assign_groups(params, t_inner["param_groups"])
    # the template masters' pickled attributes (tensor_model_parallel, partition_dim, ...)
    t_params = [(k, tmodel[k]) for _, _, k in mc.parameter_names([("model", tmodel)])]
    attrs = {}
    for gi, names in enumerate(mc.assign_groups(t_params, t_inner["param_groups"])):
        for j, name in enumerate(names):
            attrs[name] = mc.state_of(t_masters[gi][j])
    t_state0 = next(iter(t_inner["state"].values()))
    groups, state, master_groups = [], {}, []
    idx = 0
    for tg, names in zip(t_inner["param_groups"], names_by_group):
        g = OrderedDict() if isinstance(tg, OrderedDict) else {}
        for k, v in tg.items():
            g[k] = list(range(idx, idx + len(names))) if k == "params" else copy.deepcopy(v)
        groups.append(g)
        mg = []
        for name in names:
            layer = mc.layer_of(name)
            gkey = name if layer is None else mc.with_layer(name, layer + pp_rank * lps)
            kind = mc.split_kind(name, True)
            seed = (gkey,) if kind == "rep" else (gkey, tp_rank)
            st = {}
            for sk, sv in t_state0.items():
                if sk == "step":
                    st[sk] = sv.clone()
                elif sk == "exp_avg":
                    st[sk] = 1e-4 * torch.randn(masters[name].shape, generator=seeded(sk, *seed))
                elif sk == "exp_avg_sq":
                    st[sk] = 1e-8 * torch.rand(masters[name].shape, generator=seeded(sk, *seed))
                else:
                    raise SystemExit(f"template optimizer state key {sk}: not generated")
            state[idx] = st
            mg.append(mc.with_state(masters[name], attrs[mc.with_layer(name, 0) if layer is not None else name]))
            idx += 1
        master_groups.append(mg)
    inner = {}
    for k, v in t_inner.items():
        inner[k] = state if k == "state" else groups if k == "param_groups" else copy.deepcopy(v)
    wrap = {}
    for k, v in t_wrap.items():
        wrap[k] = inner if k == "optimizer" else master_groups if k == "fp32_from_fp16_params" \
            else copy.deepcopy(v)

    out = OrderedDict() if isinstance(tmpl_sd, OrderedDict) else {}
    for k, v in tmpl_sd.items():
        if k == "model":
            out[k] = model
        elif k == "optimizer":
            out[k] = wrap
        elif k == "args":
            a = copy.deepcopy(v)
            a.num_layers = o.layers
            a.hidden_size = o.hidden
            a.ffn_hidden_size = o.ffn
            a.num_attention_heads = o.heads
            a.num_query_groups = o.groups
            a.kv_channels = o.kv_channels
            a.vocab_size = o.vocab
            a.padded_vocab_size = vp
            out[k] = a
        else:
            out[k] = copy.deepcopy(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(REPO, ".bench", "megatron_tp2pp2"))
    ap.add_argument("--template", default=os.path.join(REPO, "testdata", "megatron", "tp2pp2_bf16_optim"))
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=2816)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--groups", type=int, default=4, help="query groups (GQA)")
    ap.add_argument("--kv-channels", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=50257, help="args.vocab_size (NullTokenizer: +1 EOD)")
    o = ap.parse_args()

    tracker, sub, files = mc.rank_files(o.template)
    if sorted(files) != [(t, p) for t in range(TP) for p in range(PP)]:
        raise SystemExit(f"{o.template}: expected a TP{TP} PP{PP} checkpoint")
    tmpl = {k: mc.load(p) for k, p in files.items()}
    a0 = tmpl[(0, 0)]["args"]
    if (a0.tensor_model_parallel_size, a0.pipeline_model_parallel_size) != (TP, PP) or not a0.swiglu \
            or "optimizer" not in tmpl[(0, 0)]:
        raise SystemExit(f"{o.template}: expected TP{TP} PP{PP}, SwiGLU, with optimizer state")
    if o.layers % PP or o.groups % 4 or o.heads % o.groups or o.ffn % 4:
        raise SystemExit("sizes must split over TP 4 and PP 2")
    vp = mc.padded_vocab(o.vocab + 1 if a0.tokenizer_type == "NullTokenizer" else o.vocab,
                         a0.make_vocab_size_divisible_by, TP)

    os.makedirs(o.out, exist_ok=True)
    total = 0
    for (t, p) in sorted(files):
        sd = make_rank(o, tmpl[(t, p)], t, p, vp)
        d = os.path.join(o.out, sub, mc.rank_dir(t, p, PP))
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model_optim_rng.pt")
        mc.save(sd, path)
        del sd
        size = os.path.getsize(path)
        total += size
        print(f"{os.path.relpath(path, o.out)}: {size / 1e9:.2f} GB")
    with open(os.path.join(o.out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(tracker)
    print(f"{o.out}: TP{TP} PP{PP}, {o.layers} layers, hidden {o.hidden}, ffn {o.ffn}, heads {o.heads}/"
          f"{o.groups} groups, padded vocab {vp}: {total / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
