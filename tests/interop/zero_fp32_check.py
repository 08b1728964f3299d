"""Checks `ckptconv zero-to-fp32` output directories with the real torch.load (and, in the
venv, the real safetensors loader):

  zero_fp32_check.py batch FILE     one check per line: NAME<TAB>MODE<TAB>ARGS... (tab-separated)

modes:
  same OURS REF          REF is a directory DeepSpeed's zero_to_fp32 wrote: the same output
                         files; index json and .safetensors byte for byte; every .bin with the
                         same names in the same order, dtypes, shapes, bytes, and DeepSpeed's
                         shared tensors (tied weights) sharing storage in ours too
  derived OURS CASE MAX EXCLUDE
                         for options DeepSpeed has no committed output for: the expected output
                         is derived from DeepSpeed's default pytorch_model.bin of CASE (its
                         frozen parameters dropped when EXCLUDE is 1, sharded at MAX bytes by
                         the rules of huggingface_hub's split_torch_state_dict_into_shards and
                         indexed as zero_to_fp32 writes the index), then compared as in `same`
  module OURS PT         a ZeRO-0 checkpoint: the module state dict of model-states file PT,
                         buffers first
  optim OURS TAG_DIR MP  OURS/optimizer_states.bin holds <param>.<state> for every per-element
                         optimizer state, gathered here from the optimizer-states files of
                         model-parallel rank MP by DeepSpeed's partition rules
  stload OURS REF        (venv) every .safetensors of OURS loads with safetensors and equals
                         REF's tensor by tensor
  stbin OURS BIN         (venv) OURS/model.safetensors loads with safetensors and holds the
                         tensors of DeepSpeed's BIN
  hashes OURS CASE KIND  the output files DeepSpeed's zero_to_fp32 wrote for KIND, byte for byte:
                         the names, sizes and sha256 its run recorded in CASE/expected/tensors.json
                         (for outputs whose bytes are not committed)
Prints ok/FAIL per check and a last line "BATCH <passed> <failed>"."""
import importlib.abc
import importlib.machinery
import json
import math
import os
import re
import sys
import types
from collections import OrderedDict

import torch

OUTPUT_EXT = (".bin", ".safetensors", ".index.json")


class _Stub:
    """Stands in for the DeepSpeed classes the optimizer-states pickles name (loss scaler,
    ZeroStageEnum, fragment_address): their arguments are kept, nothing runs."""

    def __init__(self, *args, **kwargs):
        self.args = args


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "deepspeed" or name.startswith("deepspeed."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = lambda attr: type(attr, (_Stub,), {})
        return m

    def exec_module(self, module):
        pass


sys.meta_path.append(_StubFinder())


class Fail(Exception):
    pass


def load(path):
    return torch.load(path, map_location="cpu")


def bits(t):
    t = t.contiguous()
    if t.dtype.is_floating_point:
        t = t.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[t.element_size()])
    return t


def same_view_groups(sd):
    """Names sharing one storage and view (tied weights), as lists of names."""
    groups = OrderedDict()
    for name, t in sd.items():
        key = (t.storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        groups.setdefault(key, []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def compare_dicts(ours, ref, where):
    if list(ours) != list(ref):
        raise Fail(f"{where}: names differ:\n  ours {list(ours)}\n  ref  {list(ref)}")
    for name, r in ref.items():
        o = ours[name]
        if o.dtype != r.dtype or o.shape != r.shape:
            raise Fail(f"{where}: {name}: {o.dtype} {tuple(o.shape)}, expected {r.dtype} {tuple(r.shape)}")
        if not torch.equal(bits(o), bits(r)):
            raise Fail(f"{where}: {name}: values differ")
    for names in same_view_groups(ref):
        if len({ours[n].storage().data_ptr() for n in names}) != 1:
            raise Fail(f"{where}: {names} are one tensor in the reference but not in ours")


def output_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(OUTPUT_EXT) and os.path.isfile(os.path.join(d, f)))


def check_same(ours, ref):
    if output_files(ours) != output_files(ref):
        raise Fail(f"files differ:\n  ours {output_files(ours)}\n  ref  {output_files(ref)}")
    for f in output_files(ref):
        a, b = os.path.join(ours, f), os.path.join(ref, f)
        if f.endswith((".json", ".safetensors")):
            with open(a, "rb") as x, open(b, "rb") as y:
                if x.read() != y.read():
                    raise Fail(f"{f} differs from DeepSpeed's byte for byte")
        else:
            compare_dicts(load(a), load(b), f)
    return f"{len(output_files(ref))} files equal"


def frozen_names(case):
    with open(os.path.join(case, "expected", "checkpoint.json")) as f:
        ms = json.load(f)["model_states"][0]
    return set(ms.get("frozen_param_shapes") or {})


def hf_shards(sd, max_size):
    """huggingface_hub's split_torch_state_dict_into_shards on zero_to_fp32's state dict of
    fresh tensors: storage = the tensor itself (tied names share one), size = its bytes;
    every zero-size tensor has storage address 0, so they share one "storage" as well."""
    first_of, groups = {}, OrderedDict()
    shards, cur, cur_size, total = [], [], 0, 0
    for name, t in sd.items():
        key = "empty" if t.numel() == 0 else (t.storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key in groups:
            groups[key].append(name)
            continue
        groups[key] = [name]
        size = t.numel() * t.element_size()
        if size > max_size:
            total += size
            shards.append([name])
            continue
        if cur_size + size > max_size:
            shards.append(cur)
            cur, cur_size = [], 0
        cur.append(name)
        cur_size += size
        total += size
    if cur:
        shards.append(cur)
    for names in groups.values():
        for shard in shards:
            if names[0] in shard:
                shard.extend(names[1:])
                break
    return shards, total


def check_derived(ours, case, max_size, exclude):
    ref = load(os.path.join(case, "expected", "pytorch_model.bin"))
    if exclude == "1":
        frozen = frozen_names(case)
        frozen_ptrs = {ref[n].storage().data_ptr() for n in frozen if n in ref}
        ref = OrderedDict((n, t) for n, t in ref.items()
                          if n not in frozen and t.storage().data_ptr() not in frozen_ptrs)
    shards, total = hf_shards(ref, int(max_size))
    names = ["pytorch_model.bin"] if len(shards) == 1 else \
        [f"pytorch_model-{i + 1:05d}-of-{len(shards):05d}.bin" for i in range(len(shards))]
    want = sorted(names + (["pytorch_model.bin.index.json"] if len(shards) > 1 else []))
    if output_files(ours) != want:
        raise Fail(f"files differ:\n  ours {output_files(ours)}\n  want {want}")
    if len(shards) > 1:
        index = {"metadata": {"total_size": total},
                 "weight_map": {n: names[i] for i, s in enumerate(shards) for n in s}}
        with open(os.path.join(ours, "pytorch_model.bin.index.json")) as f:
            if f.read() != json.dumps(index, indent=2, sort_keys=True) + "\n":
                raise Fail("the index json differs from what zero_to_fp32 would write")
    for fname, shard in zip(names, shards):
        compare_dicts(load(os.path.join(ours, fname)), OrderedDict((n, ref[n]) for n in shard), fname)
    return f"{len(names)} files as derived from DeepSpeed's output"


def check_module(ours, pt):
    sd = load(pt)
    buffers = set(sd["buffer_names"])
    module = sd["module"]
    ref = OrderedDict([(k, v) for k, v in module.items() if k in buffers] +
                      [(k, v) for k, v in module.items() if k not in buffers])
    compare_dicts(load(os.path.join(ours, "pytorch_model.bin")), ref, "pytorch_model.bin")
    return f"{len(ref)} tensors equal the module state dict"


def natural_keys(text):
    return [int(c) if c.isdigit() else c for c in re.split(r"(\d+)", text)]


def ref_optimizer_states(tag_dir, mp):
    files = sorted(os.listdir(tag_dir), key=natural_keys)
    mine = [f for f in files if f"mp_rank_{int(mp):02d}" in f]
    optim = [load(os.path.join(tag_dir, f))["optimizer_state_dict"] for f in mine if f.endswith("_optim_states.pt")]
    model = load(os.path.join(tag_dir, [f for f in mine if f.endswith("_model_states.pt")][0]))
    stage = optim[0]["zero_stage"].args[0] if "zero_stage" in optim[0] else 1
    world = len(optim)
    if stage == 3:
        states = [o["optimizer_state_dict"]["state"] for o in optim]
    else:
        states = [o["base_optimizer_state"]["state"] for o in optim]
    keys = [k for k, v in states[0][0].items() if torch.is_tensor(v) and v.dim() == 1]
    out = OrderedDict()
    for key in keys:
        if stage == 3:
            flat = [torch.cat([s[k][key] for k in sorted(s)]) for s in states]
            offset = 0
            for group in model["param_shapes"]:
                for name, shape in group.items():
                    n = math.prod(shape)
                    q = -(-n // world)
                    out[f"{name}.{key}"] = torch.cat([f[offset:offset + q] for f in flat])[:n].view(shape)
                    offset += q
        else:
            for g, group in enumerate(model["param_shapes"]):
                flat = torch.cat([s[g][key] for s in states])
                offset = 0
                for name, shape in group.items():
                    n = math.prod(shape)
                    out[f"{name}.{key}"] = flat[offset:offset + n].view(shape)
                    offset += n
    return out


def check_optim(ours, tag_dir, mp):
    ref = ref_optimizer_states(tag_dir, mp)
    compare_dicts(load(os.path.join(ours, "optimizer_states.bin")), ref, "optimizer_states.bin")
    return f"{len(ref)} optimizer-state tensors equal the partitions"


def check_stload(ours, ref):
    from safetensors.torch import load_file

    n = 0
    for f in output_files(ref):
        if f.endswith(".safetensors"):
            a, b = load_file(os.path.join(ours, f)), load_file(os.path.join(ref, f))
            compare_dicts(OrderedDict(sorted(a.items())), OrderedDict(sorted(b.items())), f)
            n += 1
    if n == 0:
        raise Fail("no .safetensors files to load")
    return f"{n} safetensors files load and equal DeepSpeed's"


def check_stbin(ours, ref_bin):
    from safetensors.torch import load_file

    a = load_file(os.path.join(ours, "model.safetensors"))
    b = load(ref_bin)
    compare_dicts(OrderedDict(sorted(a.items())), OrderedDict(sorted(b.items())), "model.safetensors")
    return f"{len(b)} tensors load and equal DeepSpeed's .bin"


def check_hashes(ours, case, kind):
    import hashlib

    with open(os.path.join(case, "expected", "tensors.json")) as f:
        files = json.load(f)["outputs"][kind]["files"]
    if output_files(ours) != sorted(x["file"] for x in files):
        raise Fail(f"files differ:\n  ours {output_files(ours)}\n  DeepSpeed's {sorted(x['file'] for x in files)}")
    for x in files:
        with open(os.path.join(ours, x["file"]), "rb") as f:
            data = f.read()
        if len(data) != x["size"] or hashlib.sha256(data).hexdigest() != x["sha256"]:
            raise Fail(f"{x['file']}: not the bytes DeepSpeed wrote ({len(data)} bytes, DeepSpeed's {x['size']})")
    return f"{len(files)} files byte for byte as DeepSpeed's"


MODES = {"same": check_same, "hashes": check_hashes, "derived": check_derived, "module": check_module, "optim": check_optim,
         "stload": check_stload,
         "stbin": check_stbin}


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "batch":
        sys.exit(__doc__)
    passed = failed = 0
    with open(sys.argv[2]) as f:
        for line in f:
            name, mode, *args = line.rstrip("\n").split("\t")
            try:
                what = MODES[mode](*args)
                print(f"ok   {name}: {what}")
                passed += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported, the batch goes on
                print(f"FAIL {name}: {type(e).__name__ if not isinstance(e, Fail) else ''} {e}")
                failed += 1
    print(f"BATCH {passed} {failed}")


if __name__ == "__main__":
    main()
