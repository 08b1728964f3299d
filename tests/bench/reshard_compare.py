#!/usr/bin/env python3
"""Checks that two Megatron-LM legacy checkpoint roots hold the same checkpoint.

    reshard_compare.py A B [--ignore KEY ...] [--ignore-arg NAME ...] [--strict-attrs]

Same tracker text, same iteration directory, same mp_rank_* directories; in every rank file
the same top-level keys in the same order, `args` with the same attributes and values,
`model` / `model{i}` with the same keys in the same order, and every tensor (model weights,
optimizer moments, fp32 masters, step counts, rng tensors) with the same dtype, shape and
bytes (bit-equal); other values equal. Tensors' pickled Python attributes (Megatron's fp32
masters carry tensor_model_parallel, partition_dim, ...; Megatron does not read them back:
it copies the masters' data into tensors it builds itself) are compared too, a difference
only reported unless --strict-attrs. --ignore skips a top-level entry (e.g. rng_state
for a round trip through a layout with other ranks), --ignore-arg an attribute of `args`
(e.g. rank, world_size when comparing with a checkpoint Megatron wrote at that layout).
Exits 1 with the first difference.
"""

import argparse
import math
import os
import sys
from argparse import Namespace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ckpt as mc  # noqa: E402


class Differ(Exception):
    pass


STRICT_ATTRS = False
ATTR_NOTES = []


def tensor_bytes(t):
    t = mc.plain(t).detach().contiguous().reshape(-1)
    return t.view(torch.uint8) if t.numel() else t


def describe_mismatch(a, b):
    es = a.element_size()
    ne = tensor_bytes(a).view(-1, es).ne(tensor_bytes(b).view(-1, es)).any(dim=1)
    n = int(ne.sum())
    i = int(ne.nonzero()[0]) if n else 0
    fa, fb = mc.plain(a).detach().reshape(-1), mc.plain(b).detach().reshape(-1)
    idx = [int(x) for x in np.unravel_index(i, tuple(a.shape))] if a.dim() else []
    return f"{n} of {fa.numel()} values differ; first at {idx}: {fa[i].item()!r} vs {fb[i].item()!r}"


def same(a, b, path):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            raise Differ(f"{path}: {type(a).__name__} vs {type(b).__name__}")
        if a.dtype != b.dtype or a.shape != b.shape:
            raise Differ(f"{path}: {a.dtype} {list(a.shape)} vs {b.dtype} {list(b.shape)}")
        if not torch.equal(tensor_bytes(a), tensor_bytes(b)):
            raise Differ(f"{path}: {a.dtype} {list(a.shape)}: {describe_mismatch(a, b)}")
        if mc.state_of(a) != mc.state_of(b):
            msg = f"{path}: tensor attributes {mc.state_of(a)} vs {mc.state_of(b)}"
            if STRICT_ATTRS:
                raise Differ(msg)
            ATTR_NOTES.append(msg)
        return
    if type(a) is not type(b):
        raise Differ(f"{path}: {type(a).__name__} {a!r:.80} vs {type(b).__name__} {b!r:.80}")
    if isinstance(a, Namespace):
        va, vb = vars(a), vars(b)
        for k in va:
            if k not in vb:
                raise Differ(f"{path}.{k}: only in the first")
        for k in vb:
            if k not in va:
                raise Differ(f"{path}.{k}: only in the second")
        for k in va:
            same(va[k], vb[k], f"{path}.{k}")
    elif isinstance(a, dict):
        ka, kb = list(a.keys()), list(b.keys())
        if ka != kb:
            only_a = [k for k in ka if k not in b]
            only_b = [k for k in kb if k not in a]
            if only_a or only_b:
                raise Differ(f"{path}: keys only in the first {only_a[:5]}, only in the second {only_b[:5]}")
            first = next(i for i, (x, y) in enumerate(zip(ka, kb)) if x != y)
            raise Differ(f"{path}: same keys in another order (position {first}: {ka[first]!r} vs {kb[first]!r})")
        for k in ka:
            same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            raise Differ(f"{path}: length {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            raise Differ(f"{path}: numpy arrays differ")
    elif isinstance(a, float):
        if not (a == b or (math.isnan(a) and math.isnan(b))):
            raise Differ(f"{path}: {a!r} vs {b!r}")
    elif a != b:
        raise Differ(f"{path}: {a!r:.200} vs {b!r:.200}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--ignore", action="append", default=[], metavar="KEY",
                    help="top-level entry not compared (repeatable)")
    ap.add_argument("--ignore-arg", action="append", default=[], metavar="NAME",
                    help="attribute of args not compared (repeatable)")
    ap.add_argument("--strict-attrs", action="store_true", help="differing tensor attributes fail too")
    o = ap.parse_args()
    global STRICT_ATTRS
    STRICT_ATTRS = o.strict_attrs

    ta, sa, fa = mc.rank_files(o.a)
    tb, sb, fb = mc.rank_files(o.b)
    try:
        if ta != tb:
            raise Differ(f"latest_checkpointed_iteration.txt: {ta!r} vs {tb!r}")
        if sa != sb:
            raise Differ(f"iteration directory: {sa} vs {sb}")
        if sorted(fa) != sorted(fb):
            raise Differ(f"{sa}: rank directories {[os.path.basename(os.path.dirname(p)) for p in fa.values()]} vs "
                         f"{[os.path.basename(os.path.dirname(p)) for p in fb.values()]}")
        n_tensors = 0
        for key in sorted(fa):
            rel = os.path.relpath(fa[key], o.a)
            da, db = mc.load(fa[key]), mc.load(fb[key])
            for d in (da, db):
                for k in o.ignore:
                    d.pop(k, None)
                if isinstance(d.get("args"), Namespace):
                    for k in o.ignore_arg:
                        vars(d["args"]).pop(k, None)
            same(da, db, rel)

            def count(x):
                if isinstance(x, torch.Tensor):
                    return 1
                if isinstance(x, dict):
                    return sum(count(v) for v in x.values())
                if isinstance(x, (list, tuple)):
                    return sum(count(v) for v in x)
                return 0
            n_tensors += count(da)
            del da, db
    except Differ as e:
        print(f"reshard_compare: {o.a} and {o.b} differ: {e}", file=sys.stderr)
        sys.exit(1)
    skipped = o.ignore + [f"args.{k}" for k in o.ignore_arg]
    ign = f" (not compared: {', '.join(skipped)})" if skipped else ""
    print(f"same checkpoint: {len(fa)} rank files, {n_tensors} tensors bit-equal, args and all other "
          f"entries equal{ign}")
    if ATTR_NOTES:
        print(f"note: {len(ATTR_NOTES)} tensors with other pickled attributes, e.g. {ATTR_NOTES[0]}")


if __name__ == "__main__":
    main()
