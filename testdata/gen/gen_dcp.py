#!/usr/bin/env python3
"""A plain PyTorch Distributed Checkpoint (no Megatron names), as FSDP2 and torchtitan write them.

    torchrun --nproc_per_node 2 gen_dcp.py OUT     # writes OUT/ (world size 2, gloo, CPU)
    gen_dcp.py --describe OUT                      # OUT/expected.json: every global tensor's
                                                   # dtype, shape and sha256, read back by DCP
    gen_dcp.py --hostile OUT BAD                   # BAD/<case>/.metadata: OUT's metadata made
                                                   # hostile (readers must refuse them)

Driver: run_megatron.sh dist (see README_megatron.md). The state dict holds DTensors sharded
on a 1-D CPU device mesh of two ranks: Shard(0) (FSDP2's layout, one uneven), Shard(1) and
Replicate (written once), plus plain tensors and non-tensor values (DCP stores those as bytes).
Every value is a function of its name, so a second run writes the same tensors.
"""

import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp


def full_tensors():
    g = torch.Generator().manual_seed(4321)
    return {
        "model.embed.weight": torch.randn(11, 6, generator=g),  # 11 rows: uneven Shard(0)
        "model.layers.0.attn.qkv.weight": torch.randn(12, 6, generator=g),
        "model.layers.0.attn.out.weight": torch.randn(6, 8, generator=g).to(torch.bfloat16),
        "model.layers.0.norm.weight": torch.randn(6, generator=g),
        "model.head.weight": torch.randn(10, 6, generator=g).to(torch.float16),
        "optim.state.model.embed.weight.exp_avg": torch.randn(11, 6, generator=g),
        "optim.state.model.embed.weight.step": torch.tensor(3.0),
        "counts": torch.arange(10, dtype=torch.int64),
    }


PLACEMENT = {
    "model.embed.weight": "shard0",
    "model.layers.0.attn.qkv.weight": "shard0",
    "model.layers.0.attn.out.weight": "shard1",
    "model.layers.0.norm.weight": "replicate",
    "model.head.weight": "shard0",
    "optim.state.model.embed.weight.exp_avg": "shard0",
}


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def save(out):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    kinds = {"shard0": [Shard(0)], "shard1": [Shard(1)], "replicate": [Replicate()]}
    state = {}
    for k, v in full_tensors().items():
        state[k] = distribute_tensor(v, mesh, kinds[PLACEMENT[k]]) if k in PLACEMENT else v
    state["train"] = {"step": 10, "lr": 3e-4, "name": "plain-dcp"}
    dcp.save(state, checkpoint_id=out)
    dist.barrier()
    dist.destroy_process_group()


def describe(out):
    # read back by DCP itself, without a process group
    state = {k: torch.empty_like(v) for k, v in full_tensors().items()}
    state["train"] = {"step": 0, "lr": 0.0, "name": ""}
    dcp.load(state, checkpoint_id=out, no_dist=True)
    rec = {"producer": f"torch {torch.__version__} torch.distributed.checkpoint.save, world size 2",
           "tensors": []}
    for k, want in full_tensors().items():
        got = state[k]
        assert torch.equal(got, want), k
        rec["tensors"].append({"name": k, "dtype": str(got.dtype).replace("torch.", ""),
                               "shape": list(got.shape),
                               "sha256": hashlib.sha256(tensor_bytes(got)).hexdigest()})
    rec["train"] = state["train"]
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print(f"{out}: {len(rec['tensors'])} tensors equal what was saved")


def hostile(out, bad):
    """Metadata that a reader must refuse: a code reference (pickle runs os.system on
    torch.load of it), and a data file outside the checkpoint directory."""
    import copy
    import pickle

    with open(os.path.join(out, ".metadata"), "rb") as f:
        md = pickle.load(f)
    cases = {}
    evil = copy.deepcopy(md)
    evil.planner_data = os.system
    cases["unsafe_global"] = evil
    escape = copy.deepcopy(md)
    for info in escape.storage_data.values():
        info.relative_path = "../../dcp/" + info.relative_path
    cases["escaping_path"] = escape
    for name, m in cases.items():
        os.makedirs(os.path.join(bad, name), exist_ok=True)
        with open(os.path.join(bad, name, ".metadata"), "wb") as f:
            pickle.dump(m, f)
    print(f"{bad}: {', '.join(cases)}")


if __name__ == "__main__":
    if sys.argv[1] == "--describe":
        describe(sys.argv[2])
    elif sys.argv[1] == "--hostile":
        hostile(sys.argv[2], sys.argv[3])
    else:
        save(sys.argv[1])
