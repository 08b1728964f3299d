"""DeepSpeed ZeRO checkpoint fixtures for `ckptconv zero-to-fp32` (testdata/zero/<case>/).

Two sub-commands:

  train     run under torchrun (or the deepspeed launcher), one process per rank: builds a
            tiny model, trains it for a few steps with DeepSpeed ZeRO on CPU (gloo) and calls
            engine.save_checkpoint(<case dir>). Writes <case dir>/latest and
            <case dir>/global_step<N>/.
  describe  run once per case after DeepSpeed's own zero_to_fp32 wrote <case dir>/expected/:
            writes expected/tensors.json (every output tensor, in file order) and
            expected/checkpoint.json (the input files and the metadata zero_to_fp32 reads).

testdata/gen/run_zero.sh runs every case; see testdata/gen/README_zero.md.

The model is deliberately awkward for ZeRO: odd parameter sizes (padding in every flat
group and every stage-3 partition), two optimizer param groups with different weight decay,
a tied embedding / lm_head, two frozen parameters, a persistent int64 buffer holding values
above 2**24 (zero_to_fp32 casts buffers to float32), a 0-dim float buffer and a
non-persistent buffer (which must not appear in the output).
"""

import argparse
import hashlib
import json
import os
import platform
import random
import re
import sys

VOCAB, HID, FF, SEQ = 37, 13, 23, 7
MICRO_BATCH = 2
STEPS = 3
SEED = 1234


# --------------------------------------------------------------------------------------
# train


def build_model(tied=True):
    import torch
    from torch import nn
    import torch.nn.functional as F

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            # frozen parameter of the root module (registered first, so first in named_parameters)
            self.pos = nn.Parameter(torch.randn(SEQ, HID) * 0.02, requires_grad=False)
            self.embed = nn.Embedding(VOCAB, HID)               # 481, tied with lm_head
            self.fc1 = nn.Linear(HID, FF)                       # 299 + 23
            self.norm = nn.LayerNorm(FF)                        # 23 + 23
            self.fc2 = nn.Linear(FF, HID)                       # 299 + 13 (bias frozen)
            self.fc2.bias.requires_grad_(False)
            self.lm_head = nn.Linear(HID, VOCAB, bias=False)
            if tied:
                self.lm_head.weight = self.embed.weight         # tied: one Parameter, two names
            self.register_buffer(
                "token_counts",
                torch.tensor([0, 1, -5, 2**24 + 1, 2**25 + 3, 2**40 + 7], dtype=torch.int64))
            self.register_buffer("logit_scale", torch.tensor(0.8125))       # 0-dim float
            self.register_buffer("scratch", torch.zeros(4), persistent=False)

        def forward(self, ids, targets):
            x = self.embed(ids) + self.pos[: ids.shape[1]]
            h = self.norm(F.gelu(self.fc1(x)))
            h = x + self.fc2(h)
            logits = self.lm_head(h) * self.logit_scale
            return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))

    return TinyLM()


def param_groups(model):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if name.endswith("weight") and p.dim() == 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": 0.1},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def ds_config(args):
    cfg = {
        "train_micro_batch_size_per_gpu": MICRO_BATCH,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 1000000,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": 1e-2, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0,
                       "torch_adam": True},
        },
        "zero_optimization": {"stage": args.stage},
    }
    if args.stage == 3:
        if args.sub_group_size:
            cfg["zero_optimization"]["sub_group_size"] = args.sub_group_size
    if args.dtype == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif args.dtype == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8, "loss_scale_window": 100}
    if args.grad_accum_dtype:
        cfg["data_types"] = {"grad_accum_dtype": args.grad_accum_dtype}
    return cfg


def train(args):
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import torch
    import deepspeed

    random.seed(SEED)
    torch.manual_seed(SEED)              # same initial weights on every rank
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()

    model = build_model(tied=not args.untied)
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, model_parameters=param_groups(model), config=ds_config(args))
    if rank == 0:
        print(f"[gen_zero] optimizer: {type(engine.optimizer).__name__}", flush=True)

    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 + 10 * rank + step)
        ids = torch.randint(0, VOCAB, (MICRO_BATCH, SEQ), generator=g)
        targets = torch.randint(0, VOCAB, (MICRO_BATCH, SEQ), generator=g)
        loss = engine(ids, targets)
        engine.backward(loss)
        engine.step()
        if rank == 0:
            print(f"[gen_zero] step {step} loss {loss.item():.6f}", flush=True)

    engine.save_checkpoint(args.out)
    torch.distributed.barrier()
    if rank == 0:
        print(f"[gen_zero] saved {args.out}", flush=True)


# --------------------------------------------------------------------------------------
# describe


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def tensor_bytes(t):
    import torch
    t = t.detach().contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def natural_keys(text):
    return [int(c) if c.isdigit() else c for c in re.split(r"(\d+)", text)]


def versions():
    import torch
    v = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import deepspeed
        v["deepspeed"] = deepspeed.__version__
    except Exception:  # noqa: BLE001 - deepspeed missing: describe still works
        pass
    for mod in ("safetensors", "huggingface_hub", "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            pass
    return v


def describe_bin(path, fname):
    import torch
    sd = torch.load(path, map_location="cpu", weights_only=False)
    storages = []   # (data_ptr, nbytes) in order of first use
    records = []
    first_by_view = {}
    for name, t in sd.items():
        st = t.untyped_storage()
        key = (st.data_ptr(), st.nbytes())
        if key not in storages:
            storages.append(key)
        view = (key, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        rec = {
            "name": name,
            "file": fname,
            "dtype": dtype_name(t.dtype),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "storage_offset": t.storage_offset(),
            "storage": storages.index(key),
            "storage_nbytes": st.nbytes(),
            "sha256": sha256_bytes(tensor_bytes(t)),
            "alias_of": first_by_view.get(view),
        }
        first_by_view.setdefault(view, name)
        records.append(rec)
    return records


def describe_safetensors(path, fname):
    import torch
    from safetensors.torch import load_file
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", None)
    tensors = load_file(path)
    order = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    records = []
    for name in order:
        t = tensors[name]
        records.append({
            "name": name,
            "file": fname,
            "dtype": dtype_name(t.dtype),
            "shape": list(t.shape),
            "data_offsets": header[name]["data_offsets"],
            "sha256": sha256_bytes(tensor_bytes(t)),
        })
    assert all(isinstance(v, torch.Tensor) for v in tensors.values())
    return records, meta


def output_sets(exp_dir):
    """The zero_to_fp32 outputs under expected/, one set per run of the script: the default
    run writes straight into expected/ ("default"), the others into expected/<variant>/."""
    sets = [("default", exp_dir)]
    for sub in sorted(os.listdir(exp_dir)):
        d = os.path.join(exp_dir, sub)
        if os.path.isdir(d):
            sets.append((sub, d))
    return sets


def describe_output_dir(d):
    files = sorted(f for f in os.listdir(d) if f.endswith((".bin", ".safetensors")))
    index = None
    for f in os.listdir(d):
        if f.endswith(".index.json"):
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                index = {"file": f, "content": json.load(fh)}
    # order of tensors = file order of the shards (the index maps names to shards)
    records, meta = [], None
    for f in files:
        p = os.path.join(d, f)
        if f.endswith(".bin"):
            records += describe_bin(p, f)
        else:
            r, meta = describe_safetensors(p, f)
            records += r
    names = [r["name"] for r in records]
    aliases = {}
    if all(f.endswith(".bin") for f in files):
        # tied names: same storage bytes and the same view (within one shard file)
        for r in records:
            if r.get("alias_of"):
                aliases[r["name"]] = r["alias_of"]
    out = {
        "files": [{"file": f, "size": os.path.getsize(os.path.join(d, f)),
                   "sha256": sha256_file(os.path.join(d, f))} for f in files],
        "index": index,
        "tensor_names": names,
        "aliases": aliases,
        "tensors": records,
    }
    if meta is not None:
        out["safetensors_metadata"] = meta
    err = os.path.join(d, "error.txt")
    if os.path.exists(err):
        with open(err, encoding="utf-8") as fh:
            out["error"] = fh.read().strip()
    return out


def checkpoint_summary(case_dir):
    import torch
    with open(os.path.join(case_dir, "latest"), encoding="utf-8") as f:
        tag = f.read().strip()
    ds_dir = os.path.join(case_dir, tag)
    files = sorted(os.listdir(ds_dir), key=natural_keys)
    summary = {"tag": tag, "files": [], "model_states": [], "optim_states": []}
    for f in files:
        p = os.path.join(ds_dir, f)
        summary["files"].append({"file": f, "size": os.path.getsize(p), "sha256": sha256_file(p)})
    for f in files:
        p = os.path.join(ds_dir, f)
        if f.endswith("_model_states.pt"):
            sd = torch.load(p, map_location="cpu", weights_only=False)
            ps = sd.get("param_shapes")
            if isinstance(ps, dict):
                ps = [ps]
            summary["model_states"].append({
                "file": f,
                "keys": list(sd.keys()),
                "ds_version": sd.get("ds_version"),
                "buffer_names": sd.get("buffer_names"),
                "param_shapes": [{k: list(v) for k, v in g.items()} for g in ps] if ps else ps,
                "frozen_param_shapes": {k: list(v) for k, v in sd["frozen_param_shapes"].items()}
                if sd.get("frozen_param_shapes") else sd.get("frozen_param_shapes"),
                "frozen_param_fragments": {
                    k: {"dtype": dtype_name(v.dtype), "shape": list(v.shape)}
                    for k, v in sd["frozen_param_fragments"].items()}
                if sd.get("frozen_param_fragments") else sd.get("frozen_param_fragments"),
                "shared_params": [list(x) for x in sd["shared_params"].items()]
                if isinstance(sd.get("shared_params"), dict) else sd.get("shared_params"),
                "module": {k: {"dtype": dtype_name(v.dtype), "shape": list(v.shape)}
                           for k, v in sd["module"].items()} if sd.get("module") else None,
            })
        elif f.endswith("_optim_states.pt"):
            sd = torch.load(p, map_location="cpu", weights_only=False)
            osd = sd.get("optimizer_state_dict", {})
            rec = {"file": f, "keys": list(sd.keys()), "optimizer_state_dict_keys": list(osd.keys())}
            for k in ("zero_stage", "partition_count", "ds_version", "group_paddings"):
                if k in osd:
                    rec[k] = osd[k]
            for k in ("single_partition_of_fp32_groups", "fp32_flat_groups"):
                if k in osd:
                    rec[k] = [{"dtype": dtype_name(t.dtype), "numel": t.numel(),
                               "sha256": sha256_bytes(tensor_bytes(t))} for t in osd[k]]
            summary["optim_states"].append(rec)
    return summary


def describe(args):
    case_dir = args.case_dir
    exp_dir = os.path.join(case_dir, "expected")
    for script in ("zero_to_fp32.py", "zero_to_torch.py"):
        # DeepSpeed's own scripts, copied by save_checkpoint: used, not kept
        path = os.path.join(case_dir, script)
        if os.path.exists(path):
            os.remove(path)
    out = {"case": os.path.basename(os.path.normpath(case_dir)), "versions": versions()}
    if args.note:
        out["note"] = args.note
    if os.path.isdir(exp_dir):
        out["outputs"] = {}
        for sub, d in output_sets(exp_dir):
            out["outputs"][sub] = describe_output_dir(d)
        with open(os.path.join(exp_dir, "tensors.json"), "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    summary = checkpoint_summary(case_dir)
    summary["versions"] = out["versions"]
    target = exp_dir if os.path.isdir(exp_dir) else case_dir
    with open(os.path.join(target, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--stage", type=int, required=True, choices=[0, 1, 2, 3])
    t.add_argument("--dtype", required=True, choices=["fp32", "bf16", "fp16"])
    t.add_argument("--grad-accum-dtype", default=None, help="data_types.grad_accum_dtype")
    t.add_argument("--untied", action="store_true", help="no tied embedding / lm_head")
    t.add_argument("--sub-group-size", type=int, default=0, help="ZeRO-3 sub_group_size")
    t.add_argument("--out", required=True, help="case directory (save_checkpoint target)")
    t.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)
    d = sub.add_parser("describe")
    d.add_argument("case_dir")
    d.add_argument("--note", default=None)
    args = ap.parse_args()
    if args.cmd == "train":
        train(args)
    else:
        describe(args)


if __name__ == "__main__":
    sys.exit(main())
