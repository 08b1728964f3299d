#!/usr/bin/env python3
"""Input and checks of tests/bench/dcp.sh (python with torch >= 2.2 and safetensors).

    torchrun --nproc_per_node 2 make_dcp_bench.py make OUT
        a PyTorch Distributed Checkpoint of a LLaMA-like model (hidden 2048, 18 layers, vocab
        32000, ffn 5632; bf16 weights, 2.15 GB), saved by torch.distributed.checkpoint.save
        from world size 2: attention and MLP weights as DTensors cut by rows (column
        parallel) or by columns (row parallel), embeddings by rows, norms replicated, so the
        consolidation stitches chunks of both ranks along either axis.
    make_dcp_bench.py torch_consolidate DIR OUT.safetensors
        what users run today: torch.distributed.checkpoint.format_utils.dcp_to_torch_save
        to a .pt, then torch.load and safetensors.torch.save_file.
    make_dcp_bench.py compare A.safetensors B.safetensors
        the same names, dtypes, shapes and bytes.
"""

import os
import sys

import torch

HIDDEN, LAYERS, VOCAB, FFN = 2048, 18, 32000, 5632


def layout():
    """name -> (shape, placement): 'rows' Shard(0), 'cols' Shard(1), 'rep' Replicate."""
    t = {"model.embed_tokens.weight": ((VOCAB, HIDDEN), "rows")}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = ((HIDDEN,), "rep")
        for n in ("q_proj", "k_proj", "v_proj"):
            t[p + f"self_attn.{n}.weight"] = ((HIDDEN, HIDDEN), "rows")
        t[p + "self_attn.o_proj.weight"] = ((HIDDEN, HIDDEN), "cols")
        t[p + "post_attention_layernorm.weight"] = ((HIDDEN,), "rep")
        t[p + "mlp.gate_proj.weight"] = ((FFN, HIDDEN), "rows")
        t[p + "mlp.up_proj.weight"] = ((FFN, HIDDEN), "rows")
        t[p + "mlp.down_proj.weight"] = ((HIDDEN, FFN), "cols")
    t["model.norm.weight"] = ((HIDDEN,), "rep")
    t["lm_head.weight"] = ((VOCAB, HIDDEN), "rows")
    return t


def make(out):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    kinds = {"rows": [Shard(0)], "cols": [Shard(1)], "rep": [Replicate()]}
    g = torch.Generator().manual_seed(7)
    state = {}
    for name, (shape, kind) in layout().items():
        full = (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)
        state[name] = distribute_tensor(full, mesh, kinds[kind])
    dcp.save(state, checkpoint_id=out)
    dist.barrier()
    dist.destroy_process_group()


def torch_consolidate(src, out):
    from safetensors.torch import save_file
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    pt = out + ".pt"
    dcp_to_torch_save(src, pt)
    sd = torch.load(pt, weights_only=True)
    os.remove(pt)
    save_file({k: v.contiguous() for k, v in sd.items()}, out)


def compare(a, b):
    from safetensors.torch import load_file

    x, y = load_file(a), load_file(b)
    assert sorted(x) == sorted(y), (sorted(set(x) ^ set(y)))[:5]
    for k in x:
        assert x[k].dtype == y[k].dtype and x[k].shape == y[k].shape and torch.equal(x[k], y[k]), k
    print(f"{len(x)} tensors equal (names, dtypes, shapes, bytes)")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "torch_consolidate":
        torch_consolidate(sys.argv[2], sys.argv[3])
    elif cmd == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")
