"""The comparison users write today, for tests/bench/diff.sh: two safetensors files, each tensor
pair loaded with safetensors (one pair at a time, through safe_open) and compared in torch,
with the statistics `ckptconv diff` reports: equal (same bytes), max |a - b|, max |a - b| / |b|,
elements outside |a - b| <= atol + rtol * |b| (torch.isclose with equal_nan), and the index of
the first one (else of the first unequal element).

    python diff_python.py A.safetensors B.safetensors RTOL ATOL [OUT.json]

Prints one line per tensor that is not equal; writes {name: {max_abs, max_rel, mismatched,
first}} to OUT.json when given. Exit 0 when every tensor is within the tolerance, 1 otherwise.
"""

import json
import math
import sys

import torch
from safetensors import safe_open


def unravel(flat, shape):
    index = []
    for d in reversed(shape):
        index.append(flat % d)
        flat //= d
    return list(reversed(index))


def compare(x, y, rtol, atol):
    if torch.equal(x, y):
        return None
    a, b = x.double().flatten(), y.double().flatten()
    both_nan = a.isnan() & b.isnan()
    unequal = ~((a == b) | both_nan)
    either_nan = a.isnan() | b.isnan()
    d = (a - b).abs()
    d_num = torch.where(either_nan, torch.zeros_like(d), d)
    rel = torch.where(b == 0, torch.where(d_num == 0, torch.zeros_like(d), torch.full_like(d, math.inf)),
                      d_num / b.abs())
    close = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    bad = (~close).nonzero()
    if len(bad):
        first = int(bad[0])
    else:
        idx = unequal.nonzero()
        first = int(idx[0]) if len(idx) else -1
    return {
        "max_abs": float(d_num.max()),
        "max_rel": float(rel[~either_nan].max()) if bool((~either_nan).any()) else 0.0,
        "mismatched": int((~close).sum()),
        "first": unravel(first, list(x.shape)) if first >= 0 else None,
    }


def main():
    pa, pb, rtol, atol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    out = sys.argv[5] if len(sys.argv) > 5 else None
    report, same = {}, True
    with safe_open(pa, framework="pt") as fa, safe_open(pb, framework="pt") as fb:
        na, nb = set(fa.keys()), set(fb.keys())
        for name in sorted(na - nb):
            print(f"{name}: only in A")
            same = False
        for name in sorted(nb - na):
            print(f"{name}: only in B")
            same = False
        for name in sorted(na & nb):
            x, y = fa.get_tensor(name), fb.get_tensor(name)
            if x.shape != y.shape:
                print(f"{name}: shape {list(x.shape)} -> {list(y.shape)}")
                same = False
                continue
            r = compare(x, y, rtol, atol)
            del x, y
            if r is None:
                continue
            report[name] = r
            same = same and r["mismatched"] == 0
            print(f"{name}: max abs {r['max_abs']:.6g}, max rel {r['max_rel']:.6g}, "
                  f"{r['mismatched']} mismatched, first at {r['first']}")
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if same else 1


sys.exit(main())
