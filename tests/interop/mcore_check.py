"""Checks Megatron-LM checkpoints (--ckpt-format torch) written by ckptconv against the ones
megatron-core wrote, under the real torch.load.

Megatron's args hold megatron.* enums (AttnBackend, ModelType); without megatron installed
they load as stand-ins that compare by value, which is all these checks need.

  same OUT EXPECTED [optim] [vocab=V] [norng]
                              every rank file: the same top-level keys, args' parallel sizes
                              and padded_vocab_size, model keys in the same order, every
                              tensor bit for bit, non-tensor values equal; with `optim` the
                              optimizer state too (moments, masters, param groups); with
                              vocab=V only the first V rows of the vocabulary tables count
                              (megatron-core fills new padding rows with random values, ours
                              are zeros); with norng OUT has no rng_state (a torch_dist
                              source keeps it as bytes)
  roundtrip OUT EXPECTED [norng]
                              everything equal: every value, every tensor, args included but
                              for `rank` and `local_rank`, which name the process that wrote
                              the file; with norng but for rng_state, which a rank that did
                              not exist in the layout in between cannot keep
  args OUT TP PP VPP VP       args record the layout and the padded vocabulary size VP
  naive_fc1 TP1 TP2           a plain dim-0 chunk of the TP1 SwiGLU linear_fc1 differs from
                              megatron-core's TP2 shards (the bug of Megatron-LM#360)
  loads OUT                   torch.load loads every rank file
  hf_oracle OUT EXPECTED_JSON OUT (hf2mcore of hf/llama_tiny at TP1, local names) holds the
                              tensors whose Megatron forward gave transformers' logits at
                              fixture time (hf2mcore_tp1 in the fixture's expected.json), by
                              sha256; the vocabulary tables there repeat row 199 as padding
                              where ours are zeros, so those two are left to the round trip
  moe_make ROOT               a synthetic MoE checkpoint (no real one yet): 1 layer, 4 experts
                              over EP 2 (2 per rank, global expert = ep * 2 + j), SwiGLU experts,
                              TP 1, saved as Megatron names it (mp_rank_00_EEE)
  moe_check OUT ROOT          OUT (ROOT at TP 2, EP kept) holds every expert cut per TP rank by
                              the dense rules: linear_fc1 as [gate_r; up_r], linear_fc2 by column
  corrupt ROOT HOW [RANK]     rewrite ROOT's rank files (only the RANK-th, counting from 0, if
                              given): none (rewritten unchanged, through the stand-ins),
                              or into a malformed checkpoint: args_int (args is an int),
                              state_list (an optimizer state entry is a list), nul_key (a model
                              key gains a NUL byte and its prefix names an int)
"""

import glob
import io
import os
import pickle
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Mismatch, check, run_main  # noqa: E402


class Stand(object):
    """A megatron.* object: its constructor arguments and state, compared by value."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs, self.state = args, kwargs, None

    def __setstate__(self, state):
        self.state = state

    def __reduce__(self):
        # pickled back as the class it stands for, with what it was made from
        return (type(self), self.args, self.state)

    def __eq__(self, other):
        return type(self) is type(other) and (self.args, self.kwargs, self.state) == (
            other.args, other.kwargs, other.state)

    def __repr__(self):
        return f"{type(self).__name__}{self.args}"


_stands = {}


def _stand(module, name):
    key = (module, name)
    if key not in _stands:
        cls = type(name, (Stand,), {"__module__": module, "__qualname__": name})
        cls.__new__ = lambda c, *a, **k: object.__new__(c)
        _stands[key] = cls
        # pickle imports a class's module (and so its parents) before it writes the reference
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            sys.modules.setdefault(".".join(parts[:i]), type(sys)(".".join(parts[:i])))
        setattr(sys.modules[module], name, cls)
    return _stands[key]


_Unpickler = pickle.Unpickler


class _StandUnpickler(_Unpickler):
    def find_class(self, module, name):
        if module.split(".")[0] in ("megatron", "transformer_engine"):
            return _stand(module, name)
        return super().find_class(module, name)


def load(path):
    # torch 1.13 ignores torch.load's pickle_module unless weights_only, so the stand-ins go
    # in through the pickle module it uses
    pickle.Unpickler = _StandUnpickler
    try:
        return torch.load(path, map_location="cpu")
    finally:
        pickle.Unpickler = _Unpickler


def rank_files(root):
    with open(os.path.join(root, "latest_checkpointed_iteration.txt")) as f:
        it = f.read().strip()
    d = "release" if it == "release" else f"iter_{int(it):07d}"
    files = sorted(glob.glob(os.path.join(root, d, "mp_rank_*", "model_optim_rng.pt")))
    check(files, f"{root}: no rank files under {d}")
    return it, {os.path.relpath(p, root): p for p in files}


def raw(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def equal(a, b, path, skip=()):
    """Deep equality: tensors by dtype, shape and bytes; containers item by item, in order."""
    if isinstance(b, torch.Tensor):
        check(isinstance(a, torch.Tensor), f"{path}: {type(a).__name__}, expected a tensor")
        check(a.dtype == b.dtype, f"{path}: dtype {a.dtype}, expected {b.dtype}")
        check(tuple(a.shape) == tuple(b.shape), f"{path}: shape {tuple(a.shape)}, expected {tuple(b.shape)}")
        check(raw(a) == raw(b), f"{path}: values differ")
    elif isinstance(b, dict):
        check(isinstance(a, dict), f"{path}: {type(a).__name__}, expected a dict")
        ka = [k for k in a if k not in skip]
        kb = [k for k in b if k not in skip]
        check(ka == kb, f"{path}: keys {ka[:8]}..., expected {kb[:8]}...")
        for k in kb:
            equal(a[k], b[k], f"{path}/{k}")
    elif isinstance(b, (list, tuple)):
        check(type(a) is type(b) and len(a) == len(b), f"{path}: {type(a).__name__} of {len(a)}, "
                                                        f"expected {type(b).__name__} of {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            equal(x, y, f"{path}/{i}")
    elif isinstance(b, np.ndarray):
        check(isinstance(a, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b), f"{path}: arrays differ")
    elif isinstance(b, io.BytesIO):
        check(isinstance(a, io.BytesIO) and a.getvalue() == b.getvalue(), f"{path}: BytesIO differs")
    elif hasattr(b, "__dict__") and not isinstance(b, (Stand, type)):
        check(type(a) is type(b), f"{path}: {type(a).__name__}, expected {type(b).__name__}")
        equal(vars(a), vars(b), path)
    else:
        check(a == b or (a != a and b != b), f"{path}: {a!r}, expected {b!r}")


LAYOUT_ARGS = ("tensor_model_parallel_size", "pipeline_model_parallel_size",
               "virtual_pipeline_model_parallel_size", "padded_vocab_size",
               "transformer_pipeline_model_parallel_size", "expert_tensor_parallel_size")


VOCAB_TABLES = ("embedding.word_embeddings.weight", "output_layer.weight")


def vocab_rows(a, b, rel, key, vocab, rank):
    """The true-vocabulary rows of a vocabulary table shard equal; ours pads with zeros."""
    rows = b.shape[0]
    first = rank * rows
    keep = max(0, min(rows, vocab - first))
    equal(a[:keep], b[:keep], f"{rel}/{key}[:{keep}]")


def cmd_same(out, expected, *opts):
    optim = "optim" in opts
    vocab = next((int(o[6:]) for o in opts if o.startswith("vocab=")), 0)
    it_a, fa = rank_files(out)
    it_b, fb = rank_files(expected)
    check(it_a == it_b, f"tracker says {it_a}, expected {it_b}")
    check(sorted(fa) == sorted(fb), f"rank files {sorted(fa)}, expected {sorted(fb)}")
    for rel in sorted(fb):
        a, b = load(fa[rel]), load(fb[rel])
        keys_b = [k for k in b if not ("norng" in opts and k == "rng_state")]
        check(list(a) == keys_b, f"{rel}: top-level keys {list(a)}, expected {keys_b}")
        for name in LAYOUT_ARGS:
            equal(getattr(a["args"], name, None), getattr(b["args"], name, None), f"{rel}/args.{name}")
        for k in ("iteration", "checkpoint_version"):
            equal(a[k], b[k], f"{rel}/{k}")
        tp_rank = int(os.path.basename(os.path.dirname(rel))[8:10])
        for k in b:
            if k.startswith("model") and vocab:
                equal(a[k], b[k], f"{rel}/{k}", skip=VOCAB_TABLES)
                for t in VOCAB_TABLES:
                    if t in b[k]:
                        vocab_rows(a[k][t], b[k][t], rel, t, vocab, tp_rank)
            elif k.startswith("model"):
                equal(a[k], b[k], f"{rel}/{k}")
        if optim:
            for k in ("optimizer", "opt_param_scheduler"):
                check(k in b, f"{expected}: {rel} has no {k}")
                equal(a[k], b[k], f"{rel}/{k}")
        print(f"{rel}: {len(a['model'] if 'model' in a else a['model0'])} model keys equal")


def cmd_roundtrip(out, expected, norng=""):
    _, fa = rank_files(out)
    _, fb = rank_files(expected)
    check(sorted(fa) == sorted(fb), f"rank files {sorted(fa)}, expected {sorted(fb)}")
    for rel in sorted(fb):
        a, b = load(fa[rel]), load(fb[rel])
        for args in (a["args"], b["args"]):
            for per_process in ("rank", "local_rank"):
                if hasattr(args, per_process):
                    delattr(args, per_process)
        equal(a, b, rel, skip=("rng_state",) if norng else ())


def cmd_args(out, tp, pp, vpp, padded):
    _, files = rank_files(out)
    for rel, path in files.items():
        args = load(path)["args"]
        got = (args.tensor_model_parallel_size, args.pipeline_model_parallel_size,
               args.virtual_pipeline_model_parallel_size, args.padded_vocab_size)
        want = (int(tp), int(pp), None if int(vpp) == 1 else int(vpp), int(padded))
        check(got == want, f"{rel}: args (tp, pp, vpp, padded_vocab_size) = {got}, expected {want}")


def cmd_naive_fc1(tp1, tp2):
    _, f1 = rank_files(tp1)
    _, f2 = rank_files(tp2)
    full = load(next(iter(f1.values())))["model"]["decoder.layers.0.mlp.linear_fc1.weight"]
    naive = torch.chunk(full, 2, dim=0)
    for r, rel in enumerate(sorted(f2)):
        real = load(f2[rel])["model"]["decoder.layers.0.mlp.linear_fc1.weight"]
        check(not torch.equal(naive[r], real), f"{rel}: a naive chunk equals megatron-core's shard")
        gate, up = full.chunk(2, dim=0)
        ours = torch.cat([gate.chunk(2)[r], up.chunk(2)[r]])
        check(torch.equal(ours, real), f"{rel}: [gate_r; up_r] differs from megatron-core's shard")


def cmd_loads(out):
    _, files = rank_files(out)
    for path in files.values():
        load(path)


def cmd_hf_oracle(out, expected_json):
    import hashlib
    import json
    with open(expected_json) as f:
        want = json.load(f)["hf2mcore_tp1"]["tensors"]
    _, files = rank_files(out)
    check(len(files) == 1, f"{len(files)} rank files, expected 1 (TP1)")
    model = load(next(iter(files.values())))["model"]
    compared = 0
    for rec in want:
        if rec["name"] in VOCAB_TABLES:
            continue
        t = model.get(rec["name"])
        check(isinstance(t, torch.Tensor), f"{rec['name']}: missing")
        check(list(t.shape) == rec["shape"], f"{rec['name']}: shape {list(t.shape)}, expected {rec['shape']}")
        check(hashlib.sha256(raw(t)).hexdigest() == rec["sha256"], f"{rec['name']}: bytes differ from the oracle's")
        compared += 1
    print(f"{compared} tensors equal the oracle's")


MOE_EXPERTS, MOE_EP, MOE_H, MOE_F = 4, 2, 16, 32


def cmd_moe_make(root):
    import argparse
    g = torch.Generator().manual_seed(0)
    experts = [(torch.randn(2 * MOE_F, MOE_H, generator=g), torch.randn(MOE_H, MOE_F, generator=g))
               for _ in range(MOE_EXPERTS)]
    shared = {"embedding.word_embeddings.weight": torch.randn(128, MOE_H, generator=g),
              "decoder.layers.0.input_layernorm.weight": torch.randn(MOE_H, generator=g),
              "decoder.layers.0.mlp.router.weight": torch.randn(MOE_EXPERTS, MOE_H, generator=g)}
    per = MOE_EXPERTS // MOE_EP
    for ep in range(MOE_EP):
        model = dict(shared)
        for j in range(per):
            fc1, fc2 = experts[ep * per + j]
            model[f"decoder.layers.0.mlp.experts.local_experts.{j}.linear_fc1.weight"] = fc1
            model[f"decoder.layers.0.mlp.experts.local_experts.{j}.linear_fc2.weight"] = fc2
        model["decoder.final_layernorm.weight"] = shared["decoder.layers.0.input_layernorm.weight"].clone()
        model["output_layer.weight"] = shared["embedding.word_embeddings.weight"].flip(0).clone()
        args = argparse.Namespace(num_layers=1, hidden_size=MOE_H, tensor_model_parallel_size=1,
                                  pipeline_model_parallel_size=1, virtual_pipeline_model_parallel_size=None,
                                  expert_model_parallel_size=MOE_EP, num_moe_experts=MOE_EXPERTS, swiglu=True,
                                  padded_vocab_size=128, make_vocab_size_divisible_by=128, vocab_size=100,
                                  untie_embeddings_and_output_weights=True)
        d = os.path.join(root, "iter_0000001", f"mp_rank_00_{ep:03d}")
        os.makedirs(d)
        torch.save({"args": args, "checkpoint_version": 3.0, "iteration": 1, "model": model},
                   os.path.join(d, "model_optim_rng.pt"))
    with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("1")


def cmd_moe_check(out, root):
    _, src = rank_files(root)
    _, files = rank_files(out)
    check(len(files) == 2 * MOE_EP, f"{len(files)} rank files, expected TP 2 x EP {MOE_EP}")
    per = MOE_EXPERTS // MOE_EP
    for ep in range(MOE_EP):
        full = load(src[f"iter_0000001/mp_rank_00_{ep:03d}/model_optim_rng.pt"])["model"]
        for tp in range(2):
            rel = f"iter_0000001/mp_rank_{tp:02d}_{ep:03d}/model_optim_rng.pt"
            check(rel in files, f"no {rel}")
            m = load(files[rel])["model"]
            equal(m["decoder.layers.0.mlp.router.weight"], full["decoder.layers.0.mlp.router.weight"], rel)
            for j in range(per):
                key = f"decoder.layers.0.mlp.experts.local_experts.{j}."
                gate, up = full[key + "linear_fc1.weight"].chunk(2)
                equal(m[key + "linear_fc1.weight"], torch.cat([gate.chunk(2)[tp], up.chunk(2)[tp]]), rel + "/fc1")
                equal(m[key + "linear_fc2.weight"], full[key + "linear_fc2.weight"].chunk(2, dim=1)[tp], rel + "/fc2")


def _optimizer_state(root):
    opt = root["optimizer"]
    return (opt["optimizer"] if "optimizer" in opt else opt)["state"]


def _nul_key(root):
    model = root["model"]
    key = [k for k in model if not k.endswith("_extra_state")][-1]
    items = list(model.items())
    model.clear()
    for k, v in items:
        model[k + "\0x" if k == key else k] = v
    model[key] = 3
    # the optimizer comes first, so that it is read before the model names its tensors
    items = list(root.items())
    root.clear()
    root.update((k, v) for k, v in items if k == "optimizer")
    root.update((k, v) for k, v in items if k != "optimizer")


def cmd_corrupt(root, how, rank=None):
    def state_list(d):
        state = _optimizer_state(d)
        state[next(iter(state))] = [1, 2, 3]

    def qkv_rows(d):
        key = "decoder.layers.0.self_attention.linear_qkv.weight"
        d["model"][key] = d["model"][key][:-16].clone()

    def drop(prefix):
        def edit(d):
            for k in [k for k in d["model"] if k.startswith(prefix)]:
                del d["model"][k]
        return edit

    edit = {"none": lambda d: None, "args_int": lambda d: d.__setitem__("args", 5),
            "state_list": state_list, "nul_key": _nul_key, "qkv_rows": qkv_rows,
            "no_fc2": drop("decoder.layers.1.mlp.linear_fc2."), "drop_layer": drop("decoder.layers.1."),
            "args_hidden": lambda d: setattr(d["args"], "hidden_size", 32),
            "huge_positions": lambda d: setattr(d["args"], "max_position_embeddings", 2**40)}[how]
    _, files = rank_files(root)
    for i, path in enumerate(files[k] for k in sorted(files)):
        if rank is None or i == int(rank):
            d = load(path)
            edit(d)
            torch.save(d, path)


if __name__ == "__main__":
    run_main({"same": cmd_same, "roundtrip": cmd_roundtrip, "args": cmd_args, "naive_fc1": cmd_naive_fc1,
              "loads": cmd_loads, "hf_oracle": cmd_hf_oracle, "moe_make": cmd_moe_make, "moe_check": cmd_moe_check,
              "corrupt": cmd_corrupt})
