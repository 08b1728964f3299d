#!/usr/bin/env python3
"""Resume a legacy distributed-optimizer checkpoint with megatron-core and run one more step.

By hand in the fixture venv, never in CI (README_megatron_distopt.md, "Resume check"):

    PYTHONPATH=OVERLAY:testdata/gen python -m torch.distributed.run --nproc_per_node N \\
        testdata/gen/check_distopt_resume.py --family a --layout tp1pp1dp1 --load DIR

DIR holds a legacy checkpoint (model_optim_rng.pt + distrib_optim.pt per TP/PP rank; with
--ckpt-format torch_dist a dist_checkpointing save, either optimizer form) of the family's model at LAYOUT (a config name of gen_megatron_distopt.py or tpXppYdpZ[vppV]).
Megatron builds the model and its DistributedOptimizer at that layout, load_checkpoint's DIR
(--ckpt-format torch, model + optimizer, no rng), runs training.train_step once on the next
batch of the fixtures' data, and prints the loss and, per rank, the sha256 of its fp32 master
shards and Adam moments after the step. Two checkpoints that hold the same state at the same
layout (Megatron's own reshard and ckptconv's) must print the same lines.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_megatron_distopt as g  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", required=True, choices=sorted(g.FAMILIES))
    ap.add_argument("--layout", required=True)
    ap.add_argument("--load", required=True)
    ap.add_argument("--ckpt-format", default="torch", choices=("torch", "torch_dist"),
                    help="torch: legacy DIR; torch_dist: DIR in dp_reshardable or fully_reshardable form")
    opts = ap.parse_args()
    c = g.target_layout(opts.family, opts.layout)
    args, model, optimizer, sched = g.setup(c, "resume_unused", [
        "--load", opts.load, "--no-load-rng", "--ckpt-format", opts.ckpt_format])
    import torch
    import torch.distributed as dist
    from megatron.core import mpu
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    from megatron.training.checkpointing import load_checkpoint

    # megatron-core 0.16.1: load_parameter_state_from_dp_zero copies the loaded fp32 masters
    # into the optimizer's params outside torch.no_grad (its fully_reshardable twin has the
    # decorator); for an fp32 model those are views of the model's parameters, and torch refuses
    # the in-place copy ("a view of a leaf Variable that requires grad"). The same copy, without
    # autograd.
    DistributedOptimizer.load_parameter_state_from_dp_zero = torch.no_grad()(
        DistributedOptimizer.load_parameter_state_from_dp_zero)
    # the same in the torch_dist dp_reshardable load (load_parameter_state_from_dp_reshardable,
    # also without the decorator; seen: the same RuntimeError on a dp_reshardable load)
    DistributedOptimizer.load_parameter_state_from_dp_reshardable = torch.no_grad()(
        DistributedOptimizer.load_parameter_state_from_dp_reshardable)
    # and, like its fully_reshardable twin, it leaves "step" out of the states it sets
    g.install_fully_reshardable_step_fix()
    if opts.ckpt_format == "torch_dist":
        g.init_states_for_dist_load(optimizer)
    it, _ = load_checkpoint(model, optimizer, sched)
    before = g.master_hash(optimizer)
    losses = g.train_steps(args, model, optimizer, sched, 1, it)
    after = g.master_hash(optimizer)
    rank = dist.get_rank()
    tag = (f"tp{mpu.get_tensor_model_parallel_rank()} pp{mpu.get_pipeline_model_parallel_rank()} "
           f"dp{mpu.get_data_parallel_rank()}")
    lines = [f"rank {rank} ({tag}): loaded iteration {it}, masters+moments sha256 {before}",
             f"rank {rank} ({tag}): after step {it + 1}: masters+moments sha256 {after}"]
    if losses and "lm loss" in losses[0]:
        lines.append(f"rank {rank} ({tag}): step {it + 1} lm loss {losses[0]['lm loss']!r} "
                     f"grad norm {losses[0]['grad_norm']!r}")
    for r in range(dist.get_world_size()):
        if r == rank:
            print("\n".join("RESUME " + x for x in lines), flush=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
