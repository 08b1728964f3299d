"""Compare a ckptconv consolidation of a DeepSpeed ZeRO checkpoint with DeepSpeed's own
zero_to_fp32 output, loaded with the real torch.load:

  zero_check.py OURS.pt DEEPSPEED.bin

Same names in the same order, same dtypes and shapes, values bit for bit, and names that
DeepSpeed ties (one tensor under two names) still share storage in ours."""
import sys

import torch


def main(ours_path, ref_path):
    ours = torch.load(ours_path, map_location="cpu")
    ref = torch.load(ref_path, map_location="cpu")
    if list(ours) != list(ref):
        sys.exit(f"names differ:\n  ours {list(ours)}\n  ref  {list(ref)}")
    for name, r in ref.items():
        o = ours[name]
        if o.dtype != r.dtype or o.shape != r.shape:
            sys.exit(f"{name}: {o.dtype} {tuple(o.shape)}, DeepSpeed has {r.dtype} {tuple(r.shape)}")
        a, b = o.contiguous(), r.contiguous()
        if a.dtype.is_floating_point:
            a, b = a.view(torch.int32 if a.element_size() == 4 else torch.int16), \
                b.view(torch.int32 if b.element_size() == 4 else torch.int16)
        if not torch.equal(a, b):
            sys.exit(f"{name}: values differ from DeepSpeed's")
    ref_ptr = {}
    for name, r in ref.items():
        ref_ptr.setdefault(r.data_ptr(), []).append(name)
    for names in ref_ptr.values():
        if len(names) > 1 and len({ours[n].data_ptr() for n in names}) != 1:
            sys.exit(f"{names} are one tensor in DeepSpeed's output but not in ours")
    print(f"{ours_path}: {len(ref)} tensors equal DeepSpeed's zero_to_fp32 output")


if __name__ == "__main__":
    main(*sys.argv[1:])
