#!/usr/bin/env python3
"""Tensor hashes and optimizer values of a legacy Megatron-LM checkpoint directory.

    distopt_hashes.py CKPT_DIR [-o OUT.json]

CKPT_DIR holds latest_checkpointed_iteration.txt and iter_NNNNNNN/mp_rank_TT[_PPP]/
{model_optim_rng.pt, distrib_optim.pt}. Prints (or writes) the JSON described in
README_megatron_distopt.md ("oracle.json"): per file (path relative to CKPT_DIR) every tensor by
key path with dtype, shape and the sha256 of its raw little-endian bytes, and the non-tensor
values a reshard must carry (iteration, optimizer step and param_groups, the scheduler,
distrib_optim.pt's numel_unpadded / buckets_coalesced). `args` and `rng_state` are left out.

Runs with any torch from 1.13 on (Debian's python3-torch included) and needs neither megatron nor
numpy's pickled types to be importable: unknown classes in the pickles are loaded as stubs.
"""

import argparse
import hashlib
import json
import os
import pickle
import re
import sys
import types

import torch


class _Stub:
    """Stand-in for a class the pickle names but this Python cannot import."""

    def __init__(self, *a, **k):
        self.args = a

    def __setstate__(self, state):
        self.state = state


class _StubUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError):
            return type(name, (_Stub,), {"__module__": module})


_pickle_module = types.ModuleType("distopt_hashes_pickle")
_pickle_module.Unpickler = _StubUnpickler
_pickle_module.load = pickle.load
for _name in ("UnpicklingError", "HIGHEST_PROTOCOL", "Pickler", "dump", "dumps", "loads"):
    setattr(_pickle_module, _name, getattr(pickle, _name))


def load(path):
    # torch 1.13's load() replaces any pickle_module by its module global `pickle` when
    # weights_only is False, so that global is swapped for the call too.
    import torch.serialization as ts
    saved = ts.pickle
    ts.pickle = _pickle_module
    try:
        return torch.load(path, map_location="cpu", pickle_module=_pickle_module, weights_only=False)
    finally:
        ts.pickle = saved


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def tensor_record(t):
    t = t.detach().cpu().contiguous()
    raw = t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t
    data = raw.numpy().tobytes() if t.numel() else b""
    if sys.byteorder != "little" and t.element_size() > 1:
        raise SystemExit("big-endian host: byte order of the hashes would differ")
    return {"dtype": dtype_name(t.dtype), "shape": list(t.shape),
            "sha256": hashlib.sha256(data).hexdigest()}


def key_str(k):
    """A dict key as one key-path component: dtype tuples as '(float32,float32)'."""
    if isinstance(k, tuple):
        return "(" + ",".join(key_str(x) for x in k) + ")"
    if isinstance(k, torch.dtype):
        return dtype_name(k)
    return str(k)


def plain(v):
    """JSON value of a non-tensor (tuples become lists, dtypes their names)."""
    if isinstance(v, dict):
        return {key_str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, torch.dtype):
        return dtype_name(v)
    if isinstance(v, torch.Tensor):
        return tensor_record(v)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return repr(v)


def has_tensor(obj):
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, dict):
        return any(has_tensor(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(has_tensor(v) for v in obj)
    return False


def walk(obj, path, tensors, values):
    """Tensors by key path; a subtree without tensors is one value at its path."""
    if isinstance(obj, torch.Tensor):
        tensors["/".join(path)] = tensor_record(obj)
    elif not has_tensor(obj):
        values["/".join(path)] = plain(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, path + [key_str(k)], tensors, values)
    else:
        for i, v in enumerate(obj):
            walk(v, path + [str(i)], tensors, values)


SKIP = ("args", "rng_state")


def describe_file(path):
    sd = load(path)
    tensors, values = {}, {}
    # a mixture of experts' chained optimizer saves a list: one state per optimizer, None where
    # this rank is not that optimizer's data-parallel rank 0
    items = list(enumerate(sd)) if isinstance(sd, list) else list(sd.items())
    for k, v in items:
        if k in SKIP:
            continue
        walk(v, [key_str(k)], tensors, values)
    out = {"top_keys": [key_str(k) for k, _ in items], "tensors": tensors, "values": values}
    if isinstance(sd, list):
        out["list"] = [v is not None for v in sd]
    return out


def describe_dir(root):
    it = open(os.path.join(root, "latest_checkpointed_iteration.txt")).read().strip()
    out = {"latest_checkpointed_iteration": it, "files": {}}
    it_dir = os.path.join(root, f"iter_{int(it):07d}")
    for sub in sorted(os.listdir(it_dir)):
        if not re.fullmatch(r"mp_rank_\d\d(_\d\d\d)?(_\d\d\d)?", sub):
            continue
        for fn in sorted(os.listdir(os.path.join(it_dir, sub))):
            if fn.endswith(".pt"):
                rel = f"iter_{int(it):07d}/{sub}/{fn}"
                out["files"][rel] = describe_file(os.path.join(root, rel))
    return out


def dumps(obj):
    """Compact JSON, keys sorted: the oracles are read by programs, and the committed fixtures
    must stay small."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ckpt_dir")
    ap.add_argument("-o", "--out")
    opts = ap.parse_args()
    d = describe_dir(opts.ckpt_dir)
    text = dumps(d) + "\n"
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
