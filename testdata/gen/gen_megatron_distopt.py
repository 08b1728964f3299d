#!/usr/bin/env python3
"""Megatron-LM checkpoints written with --use-distributed-optimizer after real training steps,
and Megatron's own reshard of them (the oracle). See README_megatron_distopt.md.

Driver: testdata/gen/run_megatron.sh distopt (sets the overlay, PYTHONPATH and environment).

    gen_megatron_distopt.py train --config NAME          # under torchrun, cwd = work directory
    gen_megatron_distopt.py reshard --config NAME --target LAYOUT [--source DIR] [--model-only DIR]
                                                         # under torchrun: one oracle pair
                                                         # (WORK/oracle/NAME__to__LAYOUT)
    gen_megatron_distopt.py world LAYOUT                 # number of processes
    gen_megatron_distopt.py oracle-pairs                 # the oracle's (source, target) pairs, and
                                                         # the model-only fixture of the pair or -
    gen_megatron_distopt.py describe WORK OUT NAME... [--tag T]  # OUT/TNAME/expected.json
    gen_megatron_distopt.py oracle WORK OUT              # OUT/oracle.json from WORK/oracle/*

`train` runs Megatron-LM's own training code on the CPU (gen_megatron.init_megatron: parse_args,
validate_args, initialize_model_parallel on gloo, the seed procedure; gen_megatron_cpu maps CUDA
device placement to the CPU), setup_model_and_optimizer (GPTModel, Megatron DDP, the distributed
optimizer), a few iterations of training.train_step with Megatron's forward_backward_func (real
forward, backward, gradient reduce-scatter, Adam step, parameter all-gather) on fixed token data,
and save_checkpoint three times from the same state: --ckpt-format torch (legacy), torch_dist
(dp_reshardable, megatron-core's default) and torch_dist with
--dist-ckpt-optim-fully-reshardable. Before saving each rank dumps its grad buffers' layout from
the live DDP and optimizer objects (param_index_map, bucket offsets) into
WORK/NAME.layout.rankR.json.

`reshard` builds the model and optimizer at a target layout, load_checkpoint's the source's
fully_reshardable save (megatron-core dist_checkpointing; Megatron's way to change TP/PP with a
distributed optimizer) and saves at the target in the legacy form.
"""

import argparse
import hashlib
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ITERS = 3
GLOBAL_BATCH = 4
SEQ = 16
VOCAB = 28            # NullTokenizer adds an EOD id: 29 ids, padded to 32 at TP1, TP2 and TP4
VOCAB_DIVISOR = 8
SEED = 1234

MODEL = [
    "--hidden-size", "8", "--ffn-hidden-size", "16", "--num-attention-heads", "4",
    "--kv-channels", "4", "--group-query-attention", "--num-query-groups", "2",
    "--swiglu", "--normalization", "RMSNorm", "--norm-epsilon", "1e-5", "--disable-bias-linear",
    "--position-embedding-type", "rope", "--rotary-base", "10000",
    "--seq-length", str(SEQ), "--max-position-embeddings", str(SEQ),
    "--vocab-size", str(VOCAB), "--tokenizer-type", "NullTokenizer",
    "--make-vocab-size-divisible-by", str(VOCAB_DIVISOR),
    "--use-cpu-initialization", "--transformer-impl", "local",
    "--init-method-std", "0.02", "--seed", str(SEED),
    "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
]
TRAIN = [
    "--micro-batch-size", "1", "--global-batch-size", str(GLOBAL_BATCH),
    "--train-iters", str(ITERS), "--save-interval", str(ITERS),
    "--lr", "1e-2", "--min-lr", "1e-3", "--lr-decay-style", "cosine", "--lr-warmup-iters", "1",
    "--weight-decay", "0.1", "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--adam-eps", "1e-8",
    "--clip-grad", "1.0", "--use-distributed-optimizer",
    # the rng states (15 kB per rank in torch_dist) would be most of these tiny files
    "--no-save-rng",
    "--ckpt-format", "torch", "--distributed-backend", "gloo",
    # no fused CUDA kernels on the CPU
    "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-swiglu-fusion",
    "--no-bias-gelu-fusion", "--no-rope-fusion", "--no-bias-dropout-fusion",
    "--no-persist-layer-norm",
]

# name: dict(family, tp, pp, dp, vpl = layers per virtual stage, layers, bf16, tied,
#            bucket = --ddp-bucket-size with --overlap-grad-reduce)
FAMILIES = {
    "a": dict(layers=2, bf16=False, tied=False),
    "b": dict(layers=2, bf16=True, tied=True),
    "c": dict(layers=4, bf16=False, tied=False, vpl=1),
    # mixture of experts: 4 experts (SequentialMLP of the local spec, no grouped GEMM), top-2
    # routing; dense and expert parameters in separate buffers and optimizers (ChainedOptimizer)
    "m": dict(layers=2, bf16=False, tied=False, experts=4),
    # fp16: fp32 masters, a dynamic grad scaler (512, grown after 2 steps: not its defaults);
    # global batch 6, a multiple of DP 3 (the scheduler follows it: every layout keeps it)
    "f": dict(layers=2, bf16=False, fp16=True, tied=False, gbs=6),
}
CONFIGS = {
    "a_tp1pp1dp1": dict(family="a", tp=1, pp=1, dp=1),
    # four buckets, none padded but the last: megatron-core's fully_reshardable save is right
    "a_tp2pp1dp2_buckets": dict(family="a", tp=2, pp=1, dp=2, bucket=330),
    # three buckets, the first padded (576 of 640): the fully_reshardable save slices every
    # parameter after that padding at the wrong offset (Megatron-LM PR #5077); the torch 2.10 set
    "a_tp2pp1dp2_gaps": dict(family="a", tp=2, pp=1, dp=2, bucket=400,
                             keep=("legacy", "fully_reshardable")),
    "a_tp1pp2dp2": dict(family="a", tp=1, pp=2, dp=2),
    "b_tp2pp2dp1_bf16_tied": dict(family="b", tp=2, pp=2, dp=1),
    "c_tp1pp2dp1_vpp2": dict(family="c", tp=1, pp=2, dp=1),
    # EP 2 inside DP 2: expert data parallel size 1, dense DP 2
    "m_tp1pp1dp2_ep2": dict(family="m", tp=1, pp=1, dp=2, ep=2),
    # the same model with the non-distributed optimizer (no --use-distributed-optimizer): the
    # plain torch_dist optimizer state (optimizer.state.exp_avg.<key>) and its legacy twin
    "a_tp2pp1dp1_plain": dict(family="a", tp=2, pp=1, dp=1, plain=True),
    # the MoE fixture's model and training with the non-distributed optimizer: the chained
    # [dense, expert] torch state dicts in model_optim_rng.pt (legacy only committed)
    "m_tp1pp1dp2_ep2_plain": dict(family="m", tp=1, pp=1, dp=2, ep=2, plain=True),
    # fp16 (the grad scaler's state in every form) with --num-distributed-optimizer-instances 3
    # at DP 3: three optimizer instances of DP 1 each, whose buckets are padded for DP 1 (to
    # 128; DP 3 would pad to 384); buckets of 1024, 896 and 448 elements, so the fully_
    # reshardable save has no PR #5077 shift
    # one optimizer for model chunk 0, one for the others (legacy only); not committed
    "c_tp1pp2dp1_vpp2_ovstep": dict(family="c", tp=1, pp=2, dp=1, bucket=100000,
                                    extra=("--overlap-param-gather",
                                           "--overlap-param-gather-with-optimizer-step"),
                                    forms=("legacy",)),
    "f_tp1pp1dp3_fp16_inst3": dict(family="f", tp=1, pp=1, dp=3, inst=3, bucket=800,
                                   keep=("legacy", "dp_reshardable")),
}
FORMS = ("legacy", "dp_reshardable", "fully_reshardable")
PLAIN_FORMS = ("legacy", "torch_dist")


def forms_of(c):
    """the forms saved: the plain optimizer's two, or the distributed optimizer's three"""
    return PLAIN_FORMS if c["plain"] else c.get("forms") or FORMS


def forms_kept(c):
    """the forms committed: the MoE fixture keeps legacy and dp_reshardable (of the forms this
    version saves: gen_megatron_distopt_versions sets FORMS), the fp16 one no fully_reshardable,
    the PR #5077 one no dp_reshardable (testdata budget; those saves stay in WORK, the oracle
    loads them)"""
    if c["experts"]:
        return tuple(f for f in forms_of(c) if f in ("legacy", "dp_reshardable"))
    return c.get("keep") or forms_of(c)


def rank_dir(c, r):
    """mp_rank_TT[_PPP][_EEE] of a dumped rank"""
    return (f"mp_rank_{r['tp']:02d}" + (f"_{r['pp']:03d}" if c["pp"] > 1 else "")
            + (f"_{r['ep']:03d}" if c["ep"] > 1 else ""))


def buffer_state(legacy, b):
    """a dumped buffer's {(param dtype, grad dtype): state} in a loaded distrib_optim.pt (the
    chained optimizer's list: the buffer's optimizer's entry)"""
    if "optimizer_index" in b:
        legacy = legacy[b["optimizer_index"]]
    return next(iter(legacy[b["gbuf_index"]].values()))


def layout_of(config):
    c = dict(FAMILIES[config["family"]])
    c.update(config)
    c.setdefault("vpl", None)
    c.setdefault("bucket", None)
    c.setdefault("experts", None)
    c.setdefault("ep", 1)
    c.setdefault("plain", False)
    c.setdefault("fp16", False)
    c.setdefault("inst", 1)
    return c


def megatron_argv(c, save):
    argv = list(MODEL) + list(TRAIN)
    if c.get("plain"):
        argv.remove("--use-distributed-optimizer")
    argv += ["--num-layers", str(c["layers"])]
    if c.get("gbs"):
        argv[argv.index("--global-batch-size") + 1] = str(c["gbs"])
    argv += ["--tensor-model-parallel-size", str(c["tp"]),
             "--pipeline-model-parallel-size", str(c["pp"])]
    if c["vpl"]:
        argv += ["--num-layers-per-virtual-pipeline-stage", str(c["vpl"])]
    if c["bf16"]:
        argv += ["--bf16"]
    if c.get("fp16"):
        argv += ["--fp16", "--initial-loss-scale", "512", "--loss-scale-window", "2",
                 "--hysteresis", "2", "--min-loss-scale", "1"]
    if c.get("inst", 1) > 1:
        argv += ["--num-distributed-optimizer-instances", str(c["inst"])]
    argv += list(c.get("extra", ()))
    if not c["tied"]:
        argv += ["--untie-embeddings-and-output-weights"]
    if c["bucket"]:
        argv += ["--overlap-grad-reduce", "--ddp-bucket-size", str(c["bucket"])]
    if c["experts"]:
        argv += ["--num-experts", str(c["experts"]), "--moe-router-topk", "2",
                 "--expert-model-parallel-size", str(c["ep"])]
        if c.get("etp"):
            argv += ["--expert-tensor-parallel-size", str(c["etp"])]
        if c.get("grouped_gemm"):
            argv += ["--moe-grouped-gemm"]
    argv += ["--save", save]
    return argv


def sha256(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()


def dtype_name(dt):
    return str(dt).replace("torch.", "")


# ----------------------------------------------------------------------------------------------
# data and the forward step (what pretrain_gpt.py's forward_step does, with the batch built on
# every rank instead of broadcast from TP rank 0: the same tokens on all TP ranks of a DP rank)


def batches(dp_rank, num_microbatches):
    """Endless iterator of micro-batches for one DP rank: iteration i, micro-batch m draws token ids
    from a generator seeded by the global micro-batch index."""
    i = 0
    while True:
        for m in range(num_microbatches):
            g = torch.Generator().manual_seed(1000 * i + dp_rank * num_microbatches + m)
            seq = torch.randint(0, VOCAB, (1, SEQ + 1), generator=g)
            yield {"tokens": seq[:, :-1].clone(), "labels": seq[:, 1:].clone(),
                   "loss_mask": torch.ones(1, SEQ), "position_ids": torch.arange(SEQ).unsqueeze(0)}
        i += 1


def loss_func(loss_mask, output_tensor):
    """pretrain_gpt.py loss_func (0.16): sum of per-token losses, token count, report."""
    losses = output_tensor.view(-1).float()
    loss_mask = loss_mask.view(-1).float()
    loss = torch.sum(losses * loss_mask)
    num_tokens = loss_mask.sum().clone().detach().to(torch.int)
    report = torch.cat([loss.clone().detach().view(1), num_tokens.view(1)])
    return loss, num_tokens, {"lm loss": report}


def forward_step(data_iterator, model):
    from functools import partial
    b = next(data_iterator)
    out = model(b["tokens"], b["position_ids"], None, labels=b["labels"], loss_mask=b["loss_mask"])
    return out, partial(loss_func, b["loss_mask"])


def install_distopt_cpu():
    """DistributedOptimizer.__init__ accepts only parameters whose Tensor.type() is a CUDA type
    name (as Float16OptimizerWithFloat16Params, which gen_megatron_cpu already wraps)."""
    import gen_megatron_cpu as shim
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    init = DistributedOptimizer.__init__
    if getattr(init, "__wrapped__", None):
        return

    def wrapper(*a, **k):
        with shim.cuda_type_names():
            return init(*a, **k)
    wrapper.__wrapped__ = init
    DistributedOptimizer.__init__ = wrapper


def install_grouped_gemm_build():
    """--moe-grouped-gemm with the local spec builds the legacy GroupedMLP (`experts.weight1`,
    `weight2`). Building, loading and saving it never calls the grouped_gemm kernels (only its
    forward does, in bf16 on a GPU), but GroupedMLP.__init__ asserts the package is importable
    and validate_args asks the GPU for compute capability >= 8. Both answered here; nothing that
    runs uses them."""
    from megatron.core.transformer.moe import grouped_gemm_util as gg
    if gg.grouped_gemm is None:
        gg.grouped_gemm = object()
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)


def setup(c, save, extra=()):
    """initialize Megatron at layout c and build model, optimizer, scheduler (no load)."""
    import gen_megatron
    import gen_megatron_cpu as shim
    shim.install()
    install_distopt_cpu()
    if c.get("experts"):
        # megatron-core 0.16.1's moe_utils imports te_general_gemm from Transformer Engine and
        # tests it against None, but without Transformer Engine the name is never bound (a
        # NameError in the router); None is the value its fallback path expects
        from megatron.core.transformer.moe import moe_utils
        if not hasattr(moe_utils, "te_general_gemm"):
            moe_utils.te_general_gemm = None
    if c.get("grouped_gemm"):
        install_grouped_gemm_build()
    sys.argv = ["pretrain_gpt.py"] + megatron_argv(c, save) + list(extra)
    args = gen_megatron.init_megatron()

    from functools import partial

    from megatron.core.enums import ModelType
    from megatron.training.training import setup_model_and_optimizer

    from gpt_builders import gpt_builder
    from model_provider import model_provider

    load_dir = args.load
    args.load = None
    model, optimizer, sched = setup_model_and_optimizer(partial(model_provider, gpt_builder),
                                                        ModelType.encoder_or_decoder)
    args.load = load_dir
    return args, model, optimizer, sched


def train_steps(args, model, optimizer, sched, n, first_iteration):
    """n iterations of training.train_step as training.train() runs them; returns the losses."""
    from megatron.core import mpu
    from megatron.core.distributed import DistributedDataParallel as DDP
    from megatron.core.distributed import finalize_model_grads
    from megatron.core.num_microbatches_calculator import get_num_microbatches
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.rerun_state_machine import RerunDataIterator
    from megatron.core.utils import get_model_config
    from megatron.training.global_vars import get_timers
    from megatron.training.training import train_step

    config = get_model_config(model[0])
    # training.train(): "Setup some training config params."
    config.grad_scale_func = optimizer.scale_loss
    config.timers = get_timers()
    if isinstance(model[0], DDP) and args.overlap_grad_reduce:
        config.no_sync_func = [m.no_sync for m in model]
        if len(model) == 1:
            config.no_sync_func = config.no_sync_func[0]
        if args.align_grad_reduce:
            config.grad_sync_func = [m.start_grad_sync for m in model]
            if len(model) == 1:
                config.grad_sync_func = config.grad_sync_func[0]
    config.finalize_model_grads_func = finalize_model_grads
    if args.virtual_pipeline_model_parallel_size:
        # The interleaved schedule isends a chunk's output (overlapped p2p) and then frees its
        # storage (deallocate_pipeline_outputs); on a GPU the caching allocator keeps it for the
        # communication stream, on the CPU gloo may still be reading freed memory: NaN
        # gradients, not reproducible. Memory management only, not the math.
        config.deallocate_pipeline_outputs = False
    for m in model:
        m.train()
    nmb = get_num_microbatches()
    dp_rank = mpu.get_data_parallel_rank()
    data = [batches(dp_rank, nmb) for _ in model]
    # skip the micro-batches of iterations already run
    for it in data:
        for _ in range(first_iteration * nmb):
            next(it)
    # training.build_train_valid_test_data_iterators wraps every iterator so
    data = [RerunDataIterator(it) for it in data]
    data_iterator = data if len(model) > 1 else data[0]
    losses = []
    for it in range(first_iteration, first_iteration + n):
        args.curr_iteration = it
        loss, skipped, should_checkpoint, should_exit, exit_code, grad_norm, _, _ = train_step(
            forward_step, data_iterator, model, optimizer, sched, config, get_forward_backward_func(),
            iteration=it)
        assert not skipped and not should_exit
        args.consumed_train_samples += get_num_microbatches() * args.micro_batch_size * args.data_parallel_size
        losses.append({k: float(v) for k, v in loss.items()})
        losses[-1]["grad_norm"] = float(grad_norm)
    args.iteration = first_iteration + n
    return losses


# ----------------------------------------------------------------------------------------------
# Megatron's own buffer layout, from the live objects


def dump_layout(model, optimizer):
    from megatron.core import mpu
    from megatron.training.utils import unwrap_model

    chunks = unwrap_model(model)
    # one optimizer, or a mixture of experts' [dense, expert] (ChainedOptimizer): the expert one
    # is laid out over the expert data parallel group
    opts = optimizer.chained_optimizers
    import gen_megatron
    names = {}
    for ci, chunk in enumerate(chunks):
        gk = gen_megatron.chunk_global_keys(chunk)
        for k, p in chunk.named_parameters():
            names[id(p)] = (ci, k, global_expert(gk[k], chunk.config))
    expert = {id(b) for m in model for b in m.expert_parallel_buffers}
    buffers = []
    for oi, opt in enumerate(opts):
        dp = opt.data_parallel_group.size()
        dp_rank = opt.data_parallel_group.rank()
        for gi, buf in enumerate(opt.buffers):
            buffers.append(dump_buffer(opt, gi, buf, names, dp, dp_rank, id(buf) in expert))
            if len(opts) > 1:
                buffers[-1].update(optimizer_index=oi, dp_size=dp, dp_rank=dp_rank)
    out = {
        "rank": torch.distributed.get_rank(),
        "tp": mpu.get_tensor_model_parallel_rank(), "pp": mpu.get_pipeline_model_parallel_rank(),
        "dp": mpu.get_data_parallel_rank(),
        "optimizer": type(opts[0]).__name__, "torch_optimizer": type(opts[0].optimizer).__name__,
        "ddp_config": {k: getattr(model[0].ddp_config, k) for k in (
            "grad_reduce_in_fp32", "overlap_grad_reduce", "overlap_param_gather",
            "use_distributed_optimizer", "bucket_size", "average_in_collective",
            "pad_buckets_for_high_nccl_busbw")},
        "buffers": buffers,
        "per_bucket_numel_unpadded": jsonable(opts[0].per_bucket_numel_unpadded) if len(opts) == 1
        else [jsonable(o.per_bucket_numel_unpadded) for o in opts],
    }
    if len(opts) > 1:
        out.update(ep=mpu.get_expert_model_parallel_rank(),
                   etp=mpu.get_expert_tensor_parallel_rank(),
                   expert_dp=mpu.get_expert_data_parallel_rank(),
                   n_optimizers=len(opts))
    return out


def global_expert(key, config):
    """local_experts.I of this expert-parallel rank -> the global expert index (the experts are
    split evenly over the EP ranks in order)"""
    import re

    from megatron.core import mpu
    m = re.search(r"\.local_experts\.(\d+)\.", key)
    if not m:
        return key
    ep = mpu.get_expert_model_parallel_world_size()
    g = mpu.get_expert_model_parallel_rank() * (config.num_moe_experts // ep) + int(m.group(1))
    return key[:m.start()] + f".local_experts.{g}." + key[m.end():]


def dump_buffer(opt, gi, buf, names, dp, dp_rank, expert):
    ci = opt.gbuf_idx_to_model_idx_map[gi]
    params = []
    for p, (start, end, bucket) in sorted(buf.param_index_map.items(), key=lambda kv: kv[1][0]):
        pci, key, gkey = names[id(p)]
        assert pci == ci
        params.append({"name": key, "global_name": gkey, "shape": list(p.shape),
                       "start": start, "end": end,
                       "bucket": bucket,
                       "shared_embedding": bool(getattr(p, "shared_embedding", False))})
    buckets = []
    for b in buf.buckets:
        n = b.grad_data.numel()
        buckets.append({"index": b.bucket_id, "start": b.offset, "end": b.offset + n,
                        "numel_unpadded": b.numel_unpadded,
                        "dp_shard": [b.offset + dp_rank * n // dp, b.offset + (dp_rank + 1) * n // dp]})
    assert [(x["start"], x["end"]) for x in buckets] == [tuple(x) for x in buf.bucket_indices]
    return {
        "gbuf_index": gi, "model_chunk": ci,
        "param_dtype": dtype_name(buf.param_dtype), "grad_dtype": dtype_name(buf.grad_dtype),
        "expert": expert,
        "numel": buf.numel, "numel_unpadded": buf.numel_unpadded,
        "buckets": buckets, "params": params,
    }


def plain_meta(model, optimizer):
    """the non-distributed optimizer has no grad-buffer layout: ranks, optimizer types and the
    parameter names of each param group (torch numbers the parameters in the saved state)"""
    from megatron.core import mpu
    from megatron.training.utils import unwrap_model

    names = {id(p): k for chunk in unwrap_model(model) for k, p in chunk.named_parameters()}
    opts = [{"optimizer": type(opt).__name__, "torch_optimizer": type(opt.optimizer).__name__,
             "param_names": [[names[id(p)] for p in g["params"]] for g in opt.optimizer.param_groups]}
            for opt in optimizer.chained_optimizers]
    meta = {
        "rank": torch.distributed.get_rank(),
        "tp": mpu.get_tensor_model_parallel_rank(), "pp": mpu.get_pipeline_model_parallel_rank(),
        "dp": mpu.get_data_parallel_rank(),
    }
    if len(opts) == 1:
        meta.update(opts[0])
    else:
        # a mixture of experts: ChainedOptimizer([dense, expert]), each its own torch optimizer
        meta.update(optimizers=opts, ep=mpu.get_expert_model_parallel_rank(),
                    expert_dp=mpu.get_expert_data_parallel_rank())
    return meta


def jsonable(v):
    if isinstance(v, dict):
        return {(k if isinstance(k, str) else repr_key(k)): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, torch.dtype):
        return dtype_name(v)
    if isinstance(v, torch.Tensor):
        return {"dtype": dtype_name(v.dtype), "shape": list(v.shape), "sha256": sha256(v)}
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)


def repr_key(k):
    if isinstance(k, tuple):
        return "(" + ",".join(repr_key(x) for x in k) + ")"
    if isinstance(k, torch.dtype):
        return dtype_name(k)
    return str(k)


def master_hash(optimizer):
    """sha256 over this rank's fp32 master shards and moments, in optimizer order."""
    h = hashlib.sha256()
    for opt in optimizer.chained_optimizers:
        for group in opt.optimizer.param_groups:
            for p in group["params"]:
                st = opt.optimizer.state[p]
                for t in (p, st["exp_avg"], st["exp_avg_sq"]):
                    h.update(t.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# train / reshard


def save_forms(args, model, optimizer, sched, root, forms=FORMS):
    from megatron.training.checkpointing import save_checkpoint
    from megatron.training.training import num_floating_point_operations
    from megatron.training.utils import update_use_dist_ckpt

    flops = args.iteration * num_floating_point_operations(args, args.global_batch_size)
    for form in forms:
        args.save = os.path.join(root, form)
        args.ckpt_format = "torch" if form == "legacy" else "torch_dist"
        # a plain optimizer has one torch_dist form: the per-parameter optimizer.state.*
        args.dist_ckpt_optim_fully_reshardable = form == "fully_reshardable"
        update_use_dist_ckpt(args)
        save_checkpoint(args.iteration, model, optimizer, sched, flops)
    return flops


def cmd_train(opts):
    name = opts.config
    c = layout_of(CONFIGS[name])
    args, model, optimizer, sched = setup(c, name)
    import torch.distributed as dist
    assert args.data_parallel_size == c["dp"], (args.data_parallel_size, c)
    losses = train_steps(args, model, optimizer, sched, ITERS, 0)
    meta = plain_meta(model, optimizer) if c["plain"] else dump_layout(model, optimizer)
    meta["losses"] = losses
    meta["master_sha256"] = master_hash(optimizer)
    meta["argv"] = sys.argv[1:]
    meta["num_floating_point_operations_so_far"] = save_forms(args, model, optimizer, sched, name,
                                                              forms_of(c))
    with open(f"{name}.layout.rank{meta['rank']}.json", "w") as f:
        json.dump(meta, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def target_layout(family, spec):
    """spec: a config name, or 'tpXppYdpZ[epE][etpT][gg][instN][vppV]' (no overlapped grad
    reduce; etpT: --expert-tensor-parallel-size T, default TP; gg: --moe-grouped-gemm, the
    legacy GroupedMLP of the local spec; instN: --num-distributed-optimizer-instances N) ->
    layout dict."""
    import re
    if spec in CONFIGS:
        c = layout_of(CONFIGS[spec])
        assert c["family"] == family, (spec, family)
        return c
    m = re.fullmatch(r"tp(\d+)pp(\d+)dp(\d+)(?:ep(\d+))?(?:etp(\d+))?(gg)?(?:inst(\d+))?(?:vpp(\d+))?",
                     spec)
    assert m, spec
    c = dict(FAMILIES[family])
    c.update(family=family, tp=int(m.group(1)), pp=int(m.group(2)), dp=int(m.group(3)),
             ep=int(m.group(4) or 1), inst=int(m.group(7) or 1))
    if m.group(5):
        c["etp"] = int(m.group(5))
    if m.group(6):
        c["grouped_gemm"] = True
    vpp = int(m.group(8) or 1)
    c["vpl"] = c["layers"] // (c["pp"] * vpp) if vpp > 1 else None
    c.setdefault("bucket", None)
    c.setdefault("experts", None)
    return c


# (source fixture, target) pairs of the oracle; the source's fully_reshardable save is loaded
ORACLE = [
    ("a_tp1pp1dp1", "a_tp2pp1dp2_buckets"), ("a_tp1pp1dp1", "a_tp1pp2dp2"), ("a_tp1pp1dp1", "tp4pp1dp1"),
    ("a_tp2pp1dp2_buckets", "a_tp2pp1dp2_buckets"), ("a_tp2pp1dp2_buckets", "a_tp1pp1dp1"),
    ("a_tp2pp1dp2_buckets", "a_tp1pp2dp2"), ("a_tp2pp1dp2_buckets", "tp4pp1dp1"),
    ("a_tp1pp2dp2", "a_tp1pp1dp1"), ("a_tp1pp2dp2", "a_tp2pp1dp2_buckets"), ("a_tp1pp2dp2", "tp2pp2dp1"),
    ("b_tp2pp2dp1_bf16_tied", "b_tp2pp2dp1_bf16_tied"), ("b_tp2pp2dp1_bf16_tied", "tp1pp1dp1"),
    ("b_tp2pp2dp1_bf16_tied", "tp1pp2dp2"), ("b_tp2pp2dp1_bf16_tied", "tp2pp1dp2"),
    ("c_tp1pp2dp1_vpp2", "c_tp1pp2dp1_vpp2"), ("c_tp1pp2dp1_vpp2", "tp1pp1dp1"),
    ("c_tp1pp2dp1_vpp2", "tp1pp2dp1"), ("c_tp1pp2dp1_vpp2", "tp2pp2dp1"), ("c_tp1pp2dp1_vpp2", "tp1pp2dp2vpp2"),
]

# the mixture-of-experts fixture to other TP/PP at the same EP: OUT/oracle_moe.json
# and to other expert layouts: EP 1 and 4, expert TP 1 under TP 2, the legacy GroupedMLP (expert
# TP 1 and 2). Not expert TP > TP: the legacy save loses data there (README_megatron_distopt.md)
ORACLE_MOE = [
    ("m_tp1pp1dp2_ep2", "m_tp1pp1dp2_ep2"), ("m_tp1pp1dp2_ep2", "tp2pp1dp2ep2"),
    ("m_tp1pp1dp2_ep2", "tp1pp2dp2ep2"),
    ("m_tp1pp1dp2_ep2", "tp1pp1dp2ep1"), ("m_tp1pp1dp2_ep2", "tp1pp1dp4ep4"),
    ("m_tp1pp1dp2_ep2", "tp2pp1dp2ep2etp1"), ("m_tp1pp1dp2_ep2", "tp2pp1dp2ep4etp1"),
    ("m_tp1pp1dp2_ep2", "tp1pp2dp2ep1"), ("m_tp1pp1dp2_ep2", "tp1pp1dp2ep2gg"),
    ("m_tp1pp1dp2_ep2", "tp2pp1dp2ep2gg"),
]
# the fp16 fixture with three optimizer instances: to itself, and to TP 2 DP 2 with two
# instances of DP 1 (tp2pp1dp1, tp1pp2dp2 equal ckptconv's too: left out, testdata budget)
ORACLE_FP16_INST = [
    ("f_tp1pp1dp3_fp16_inst3", "f_tp1pp1dp3_fp16_inst3"), ("f_tp1pp1dp3_fp16_inst3", "tp2pp1dp2inst2"),
]
# the MoE model with the non-distributed optimizer (its torch_dist save loaded): to itself, EP 1,
# EP 4 and expert TP 1 under TP 2
ORACLE_MOE_PLAIN = [
    ("m_tp1pp1dp2_ep2_plain", "m_tp1pp1dp2_ep2_plain"), ("m_tp1pp1dp2_ep2_plain", "tp1pp1dp2ep1"),
    ("m_tp1pp1dp2_ep2_plain", "tp1pp1dp4ep4"), ("m_tp1pp1dp2_ep2_plain", "tp2pp1dp2ep2etp1"),
]
# pairs whose target model is also saved alone (no optimizer) as a fixture: testdata/megatron/<name>
MODEL_ONLY_FIXTURES = {("m_tp1pp1dp2_ep2", "tp1pp1dp2ep2gg"): "moe_grouped_tp1pp1ep2"}
ORACLE_SETS = {"oracle.json": ORACLE, "oracle_moe.json": ORACLE_MOE, "oracle_fp16_inst.json": ORACLE_FP16_INST,
               "oracle_moe_plain.json": ORACLE_MOE_PLAIN}


def oracle_dir(source, target):
    return f"{source}__to__{target}"


def init_states_for_dist_load(optimizer):
    """Without TransformerEngine or apex (torch.optim.AdamW, our CPU run) a fresh
    DistributedOptimizer cannot build its sharded state dict for a dist_checkpointing load:
    state_dict() takes the step from the per-parameter states (`assert len(steps) == 1`), and
    there are none before the first step. Megatron's own remedy (used for its FSDP load) makes
    them: one optimizer step on zero gradients. load_checkpoint then overwrites every state,
    every master and the step."""
    for opt in optimizer.chained_optimizers:
        opt._init_optimizer_states_with_dummy_values()


def install_fully_reshardable_step_fix():
    """megatron-core 0.16.1 without TransformerEngine or apex: load_parameter_state_from_fully_
    reshardable (and _from_dp_zero, the legacy load) leave out "step" ("Handle torch Adam 'step'
    state separately": load_state_dict has already set it from param_groups), but
    _set_main_param_and_optimizer_states copies every key of the torch Adam state, "step"
    included (KeyError). Keep the step already set."""
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    orig = DistributedOptimizer._set_main_param_and_optimizer_states
    if getattr(orig, "__wrapped__", None):
        return

    def wrapper(self, model_param, tensors):
        if "step" not in tensors and not self.config.use_precision_aware_optimizer_no_fp8_or_ds_fp8:
            gi, go = self.model_param_group_index_map[model_param]
            st = self.optimizer.state[self.optimizer.param_groups[gi]["params"][go]]
            if "step" in st:
                tensors = dict(tensors, step=st["step"])
        return orig(self, model_param, tensors)
    wrapper.__wrapped__ = orig
    DistributedOptimizer._set_main_param_and_optimizer_states = wrapper


def install_chained_to_single_load():
    """EP 2 -> EP 1: at EP 1 the experts are ordinary data-parallel parameters (`allreduce`
    True), so megatron-core 0.16.1 builds one optimizer, not [dense, expert], and its
    ChainedOptimizer.load_state_dict hands the source's {0: dense, 1: expert} state to that one
    optimizer as is (KeyError 'optimizer'). The parameter states are keyed by model name
    (chained_optim_avoid_prefix) and load as they are; the param groups are the dense
    optimizer's (the same hyperparameters and step as the expert group, which has no decay-free
    parameters). Take entry 0 for them (the non-distributed optimizer: merged into the target's
    [{'params'}] groups, and its common step beside the loaded per-parameter state)."""
    from megatron.core.optimizer.optimizer import ChainedOptimizer

    orig = ChainedOptimizer.load_state_dict
    if getattr(orig, "__wrapped__", None):
        return

    def wrapper(self, state_dict):
        if len(self.chained_optimizers) == 1 and isinstance(state_dict, dict) and 0 in state_dict:
            if torch.distributed.get_rank() == 0:
                print("chained->single load:", {k: sorted(map(str, v)) if isinstance(v, dict) else type(v)
                                                 for k, v in state_dict.items()})
            merged = {k: v for k, v in state_dict.items() if not isinstance(k, int)}
            if "state" in merged:
                # the non-distributed optimizer: dist_checkpointing gives the target's groups
                # as [{'params'}] and its per-parameter tensors under 'state'; the source's
                # common state has the dense groups' hyperparameters ([decay, no decay], the
                # target's order too) and the common step
                first = state_dict[0]
                merged["param_groups"] = [{**g, **t} for g, t in zip(first["param_groups"], merged["param_groups"])]
                merged["state"] = {**first["state"], **merged["state"]}
            for k in sorted(k for k in state_dict if isinstance(k, int)):
                for kk, vv in state_dict[k].items():
                    merged.setdefault(kk, vv)
            state_dict = merged
        return orig(self, state_dict)
    wrapper.__wrapped__ = orig
    ChainedOptimizer.load_state_dict = wrapper


def cmd_reshard(opts):
    """Megatron's own reshard: build at the target, load the fully_reshardable save, save legacy."""
    src = layout_of(CONFIGS[opts.config])
    c = target_layout(src["family"], opts.target)
    c["plain"] = src["plain"]
    out = os.path.join("oracle", oracle_dir(opts.config, opts.target))
    source = opts.source or os.path.join(opts.config, "torch_dist" if src["plain"] else "fully_reshardable")
    args, model, optimizer, sched = setup(c, out, ["--ckpt-format", "torch_dist", "--load",
                                                   source, "--no-load-rng"])
    import torch.distributed as dist
    from megatron.training.checkpointing import load_checkpoint, save_checkpoint
    from megatron.training.utils import update_use_dist_ckpt

    if not c["plain"]:
        # the non-distributed optimizer makes its states itself (init_state_fn) for a load
        init_states_for_dist_load(optimizer)
        install_fully_reshardable_step_fix()
    if src["ep"] > 1 and c["ep"] == 1:
        install_chained_to_single_load()
    it, flops = load_checkpoint(model, optimizer, sched)
    assert it == ITERS, it
    args.iteration = it
    args.ckpt_format = "torch"
    update_use_dist_ckpt(args)
    save_checkpoint(it, model, optimizer, sched, flops)
    if opts.model_only:
        # the same model without the optimizer (--no-save-optim): a small fixture of the layout
        args.save, args.no_save_optim = opts.model_only, True
        save_checkpoint(it, model, optimizer, sched, flops)
    meta = plain_meta(model, optimizer) if c["plain"] else dump_layout(model, optimizer)
    meta["master_sha256"] = master_hash(optimizer)
    meta["argv"] = sys.argv[1:]
    with open(f"{out}.layout.rank{meta['rank']}.json", "w") as f:
        json.dump(meta, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------
# describe: expected.json


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    return h.hexdigest()


def file_list(root):
    out = []
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            out.append({"path": os.path.relpath(p, root), "size": os.path.getsize(p),
                        "sha256": sha256_file(p)})
    return sorted(out, key=lambda r: r["path"])


def describe_torch_dist(root):
    """common.pt, metadata.json and every item of .metadata: tensors read back whole by
    torch.distributed.checkpoint (one process) with their chunks, objects unpickled."""
    import io

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    import distopt_hashes as dh

    it = open(os.path.join(root, "latest_checkpointed_iteration.txt")).read().strip()
    d = os.path.join(root, f"iter_{int(it):07d}")
    reader = FileSystemReader(d)
    md = reader.read_metadata()
    sd = {}
    for k, m in md.state_dict_metadata.items():
        sd[k] = torch.zeros(tuple(m.size), dtype=m.properties.dtype) \
            if isinstance(m, TensorStorageMetadata) else io.BytesIO()
    dcp.load(sd, storage_reader=reader, no_dist=True)
    tensors, objects = {}, {}
    for k, m in md.state_dict_metadata.items():
        if isinstance(m, TensorStorageMetadata):
            r = dh.tensor_record(sd[k])
            r["chunks"] = [[list(c.offsets), list(c.sizes)] for c in m.chunks]
            covered = sum(int(torch.tensor(c.sizes).prod()) for c in m.chunks)
            if covered != sd[k].numel():
                r["numel_covered_by_chunks"] = covered
            tensors[k] = r
        else:
            v = sd[k]   # the default load planner puts the unpickled object in its place
            if isinstance(v, io.BytesIO):
                v.seek(0)
                v = torch.load(v, weights_only=False)
            objects[k] = dh.plain(v)
    common = torch.load(os.path.join(d, "common.pt"), weights_only=False)
    return {
        "latest_checkpointed_iteration": it,
        "metadata.json": json.load(open(os.path.join(d, "metadata.json"))),
        "common.pt": {"top_keys": list(common),
                      **{k: dh.plain(v) for k, v in common.items() if k != "args"}},
        "tensors": tensors, "objects": objects,
    }


TE_NORM_NAMES = {"input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
                 "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight"}


def dist_key(name):
    """(torch_dist key, layer index or None) of a local-spec global parameter name."""
    import re
    m = re.match(r"decoder\.layers\.(\d+)\.(.*)$", name)
    if not m:
        return name, None
    return "decoder.layers." + TE_NORM_NAMES.get(m.group(2), m.group(2)), int(m.group(1))


def check_fully_vs_legacy(src, ranks, c):
    """Each parameter's fp32 master and moments as the fully_reshardable save holds them (TP
    slice of the global tensor) against the legacy distrib_optim.pt of the same state (the
    buckets' unpadded parts concatenated, placed by the dumped layout). Returns the names of the
    parameters that differ, per state."""
    import gen_megatron
    from torch.distributed.checkpoint import FileSystemReader
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    import distopt_hashes as dh

    d = os.path.join(src, "fully_reshardable", f"iter_{ITERS:07d}")
    reader = FileSystemReader(d)
    md = reader.read_metadata()
    sd = {k: torch.zeros(tuple(m.size), dtype=m.properties.dtype)
          for k, m in md.state_dict_metadata.items()
          if isinstance(m, TensorStorageMetadata) and k.startswith("optimizer.state.")}
    dcp.load(sd, storage_reader=reader, no_dist=True)
    bad = {}
    checked = 0
    for r in ranks:
        if r["dp"] != 0:
            continue
        sub = f"mp_rank_{r['tp']:02d}" + (f"_{r['pp']:03d}" if c["pp"] > 1 else "")
        legacy = dh.load(os.path.join(src, "legacy", f"iter_{ITERS:07d}", sub, "distrib_optim.pt"))
        for b in r["buffers"]:
            world = next(iter(legacy[b["gbuf_index"]].values()))
            # padded buffer offset -> offset in the unpadded concatenation
            shift, lead = {}, 0
            for k in b["buckets"]:
                shift[k["index"]] = k["start"] - lead
                lead += k["numel_unpadded"]
            for p in b["params"]:
                # the last stage's copy of a tied embedding is saved under the embedding's key
                gname = ("embedding.word_embeddings.weight"
                         if c["tied"] and p["global_name"] == "output_layer.weight" else p["global_name"])
                key, layer = dist_key(gname)
                for st in ("param", "exp_avg", "exp_avg_sq"):
                    full = sd[f"optimizer.state.{st}.{key}"]
                    full = full[layer] if layer is not None else full
                    want = gen_megatron.tp_slice(p["name"], full, c["tp"], r["tp"], True).reshape(-1)
                    lo = p["start"] - shift[p["bucket"]]
                    have = world[st][lo:lo + want.numel()]
                    checked += 1
                    if not torch.equal(have, want):
                        bad.setdefault(st, []).append(f"tp{r['tp']} pp{r['pp']} chunk{b['model_chunk']} {p['global_name']}")
    return {"compared": checked, "differ": bad}


def full_states(root, ranks, c):
    """{global parameter name: {param, exp_avg, exp_avg_sq}} of a legacy checkpoint, TP-merged
    (gen_megatron.tp_merge), read from distrib_optim.pt with the dumped layout of its ranks."""
    import re

    import gen_megatron

    import distopt_hashes as dh
    parts = {}
    for r in ranks:
        if all(b.get("dp_rank", r["dp"]) != 0 for b in r["buffers"]):
            continue
        legacy = dh.load(os.path.join(root, f"iter_{ITERS:07d}", rank_dir(c, r), "distrib_optim.pt"))
        for b in r["buffers"]:
            if b.get("dp_rank", r["dp"]) != 0:
                continue
            world = buffer_state(legacy, b)
            shift, lead = {}, 0
            for k in b["buckets"]:
                shift[k["index"]] = k["start"] - lead
                lead += k["numel_unpadded"]
            for p in b["params"]:
                lo = p["start"] - shift[p["bucket"]]
                n = p["end"] - p["start"]
                name = p["global_name"]
                if re.search(r"\.mlp\.experts\.weight[12]$", name):
                    name += f"@ep{r['ep']}"
                # an expert's shards are cut over expert TP (ETP), which may differ from TP
                tp = r.get("etp", r["tp"]) if b.get("expert") else r["tp"]
                for st in ("param", "exp_avg", "exp_avg_sq"):
                    t = world[st][lo:lo + n].reshape(p["shape"])
                    parts.setdefault((name, st), {})[tp] = t
    out = {}
    grouped = {}
    for (name, st), by_tp in parts.items():
        m = re.fullmatch(r"(decoder\.layers\.\d+\.mlp\.experts\.)weight([12])@ep(\d+)", name)
        if m:
            grouped[(m.group(1), m.group(2), int(m.group(3)), st)] = by_tp
            continue
        # an expert's linear layers are cut over TP as the dense MLP's
        kind = re.sub(r"\.experts\.local_experts\.\d+\.", ".", name)
        out.setdefault(name, {})[st] = gen_megatron.tp_merge(
            kind, [by_tp[t] for t in sorted(by_tp)], True)
    for (prefix, w, ep, st), by_tp in grouped.items():
        for name, t in grouped_experts(prefix, w, ep, by_tp, c).items():
            out.setdefault(name, {})[st] = t
    return out


def grouped_experts(prefix, w, ep, by_tp, c):
    """the legacy GroupedMLP's weight1 [hidden, local * 2 ffn / ETP] / weight2 [local * ffn / ETP,
    hidden] of one EP rank as SequentialMLP's per-expert linear_fc1/linear_fc2 weights at the
    global expert index, the way GroupedMLP.sharded_state_dict maps them: each expert-TP shard
    viewed as [local, hidden, 2 ffn / ETP] resp. [local, ffn / ETP, hidden] (a reinterpretation
    of the memory, not a column cut), each expert transposed, then the shards merged as
    SequentialMLP's (by_tp: expert TP rank = TP rank, i.e. ETP 1 or ETP = TP)."""
    import gen_megatron
    assert len(by_tp) in (1, c["tp"]), ("grouped experts with expert TP != 1, TP", c)
    hidden = int(MODEL[MODEL.index("--hidden-size") + 1])
    local = c["experts"] // c["ep"]
    sub = "linear_fc1.weight" if w == "1" else "linear_fc2.weight"
    shards = []
    for t in (by_tp[k] for k in sorted(by_tp)):
        if w == "1":
            shards.append(t.reshape(local, hidden, -1).transpose(-1, -2))
        else:
            shards.append(t.reshape(local, -1, hidden).transpose(-1, -2))
    return {f"{prefix}local_experts.{ep * local + i}.{sub}":
            gen_megatron.tp_merge(f"mlp.{sub}", [x[i].contiguous() for x in shards], True)
            for i in range(local)}


def cmd_describe(opts):
    import megatron.core

    import distopt_hashes as dh
    import gen_common

    versions = gen_common.versions(torch=torch.__version__, megatron_core=megatron.core.__version__,
                                   megatron_lm_training="NVIDIA/Megatron-LM tag core_v0.16.1")
    for name in opts.names:
        c = layout_of(CONFIGS[name])
        ranks = []
        r = 0
        while os.path.exists(os.path.join(opts.work, f"{name}.layout.rank{r}.json")):
            ranks.append(json.load(open(os.path.join(opts.work, f"{name}.layout.rank{r}.json"))))
            r += 1
        assert len(ranks) == c["tp"] * c["pp"] * c["dp"], (name, len(ranks))
        src = os.path.join(opts.work, name)
        dst = os.path.join(opts.out, opts.tag + name)
        rec = {
            "fixture": f"megatron/distopt/{opts.tag}{name}",
            "versions": versions,
            "megatron_argv": ranks[0]["argv"],
            "layout": {k: c[k] for k in ("family", "tp", "pp", "dp", "layers", "bf16", "tied")
                       + (("fp16",) if c["fp16"] else ()) + (("inst",) if c["inst"] > 1 else ())},
            "vpp": c["layers"] // (c["pp"] * c["vpl"]) if c["vpl"] else None,
            "overlap_grad_reduce": bool(c["bucket"]), "ddp_bucket_size": c["bucket"],
            "iterations": ITERS,
            "losses_last_stage": [x["losses"] for x in ranks if x["losses"]][0],
            "ranks": [{k: x[k] for k in ("rank", "tp", "pp", "dp", "optimizer", "torch_optimizer",
                                         "ddp_config", "per_bucket_numel_unpadded",
                                         "master_sha256", "buffers", "param_names", "optimizers")
                       if k in x} for x in ranks],
            "forms": {},
        }
        if c["experts"] and c["plain"]:
            rec["layout"].update(experts=c["experts"], ep=c["ep"], plain=True)
            for x, y in zip(rec["ranks"], ranks):
                x.update(ep=y["ep"], expert_dp=y["expert_dp"])
        elif c["experts"]:
            rec["layout"].update(experts=c["experts"], ep=c["ep"])
            for x, y in zip(rec["ranks"], ranks):
                x.update(ep=y["ep"], expert_dp=y["expert_dp"], n_optimizers=y["n_optimizers"])
            # every parameter's state read from distrib_optim.pt by the dumped layout (a
            # torch_dist reader's output converted to legacy must give the same)
            full = full_states(os.path.join(src, "legacy"), ranks, c)
            rec["legacy_state_sha256"] = {n: {st: sha256(t) for st, t in v.items()} for n, v in full.items()}
        elif "fully_reshardable" in forms_of(c):
            rec["fully_reshardable_vs_legacy"] = check_fully_vs_legacy(src, ranks, c)
        for form in forms_kept(c):
            f = {"files": file_list(os.path.join(src, form))}
            if form == "legacy":
                f.update(dh.describe_dir(os.path.join(src, form)))
            else:
                f.update(describe_torch_dist(os.path.join(src, form)))
            rec["forms"][form] = f
        os.makedirs(dst, exist_ok=True)
        with open(os.path.join(dst, "expected.json"), "w") as fh:
            fh.write(dh.dumps(rec) + "\n")
        print(f"{opts.tag}{name}: expected.json written")


def cmd_oracle(opts):
    """OUT/oracle.json from WORK/oracle/<source>__to__<target>/ (distopt_hashes of each)."""
    import megatron.core

    import distopt_hashes as dh
    import gen_common

    pairs = []
    for source, target in ORACLE_SETS[opts.set]:
        d = os.path.join(opts.work, "oracle", oracle_dir(source, target))
        src = layout_of(CONFIGS[source])
        c = target_layout(src["family"], target)
        c["plain"] = src["plain"]
        ranks = []
        r = 0
        while os.path.exists(f"{d}.layout.rank{r}.json"):
            ranks.append(json.load(open(f"{d}.layout.rank{r}.json")))
            r += 1
        rec = {"source": f"megatron/distopt/{source}/" + ("torch_dist" if c["plain"] else "fully_reshardable"),
               "target": target,
               "target_layout": {k: c[k] for k in ("tp", "pp", "dp", "layers", "bf16", "tied")
                                 + (("experts", "ep") if c["experts"] else ())
                                 + (("plain",) if c["plain"] else ())
                                 + tuple(k for k in ("etp", "grouped_gemm") if c.get(k))
                                 + (("fp16",) if c.get("fp16") else ())
                                 + (("inst",) if c.get("inst", 1) > 1 else ())},
               "target_vpp": c["layers"] // (c["pp"] * c["vpl"]) if c["vpl"] else None,
               "target_ddp_bucket_size": c["bucket"],
               # the layout as reshard options (expert TP defaults to TP, as in Megatron)
               "reshard_args": {"tp": c["tp"], "pp": c["pp"], "dp": c["dp"],
                                **({"ep": c["ep"], "etp": c.get("etp") or c["tp"],
                                    "moe_grouped_gemm": bool(c.get("grouped_gemm"))}
                                   if c["experts"] else {})},
               "megatron_argv": ranks[0]["argv"],
               "master_sha256_per_rank": [x["master_sha256"] for x in ranks]}
        if target == source:
            rec["equals_source_legacy"] = same_tensors(d + "/.", os.path.join(opts.work, source, "legacy"))
        if c["plain"]:
            # per-parameter state: distopt_hashes' description is the whole comparison
            rec.update(dh.describe_dir(d))
            pairs.append(rec)
            continue
        # the optimizer state Megatron resharded, merged to full tensors, against the source's
        # legacy save merged the same way
        src_ranks = []
        while os.path.exists(os.path.join(opts.work, f"{source}.layout.rank{len(src_ranks)}.json")):
            src_ranks.append(json.load(open(os.path.join(
                opts.work, f"{source}.layout.rank{len(src_ranks)}.json"))))
        fa = full_states(d, ranks, c)
        fb = full_states(os.path.join(opts.work, source, "legacy"), src_ranks, src)
        common = sorted(set(fa) & set(fb))
        rec["full_state_vs_source_legacy"] = {
            "compared": len(common),
            "only_in_target": sorted(set(fa) - set(fb)), "only_in_source": sorted(set(fb) - set(fa)),
            "differ": [f"{n}/{st}" for n in common for st in ("param", "exp_avg", "exp_avg_sq")
                       if not torch.equal(fa[n][st], fb[n][st])]}
        rec.update(dh.describe_dir(d))
        pairs.append(rec)
    out = {
        "producer": "Megatron's own reshard: megatron-core 0.16.1 builds the model and the "
                    "distributed optimizer at the target layout, load_checkpoint (dist_checkpointing) "
                    "of the source's fully_reshardable save, save_checkpoint --ckpt-format torch",
        "versions": gen_common.versions(torch=torch.__version__,
                                        megatron_core=megatron.core.__version__,
                                        megatron_lm_training="NVIDIA/Megatron-LM tag core_v0.16.1"),
        "schema": "README_megatron_distopt.md, oracle.json; files/tensors/values as distopt_hashes.py",
        "pairs": pairs,
    }
    with open(os.path.join(opts.out, opts.set), "w") as f:
        f.write(dh.dumps(out) + "\n")
    print(f"{opts.set}: {len(pairs)} pairs")


def same_tensors(a, b):
    """True when two legacy checkpoint directories hold the same tensors and values."""
    import distopt_hashes as dh
    da, db = dh.describe_dir(a), dh.describe_dir(b)
    strip = ("args",)
    for d in (da, db):
        for f in d["files"].values():
            for k in list(f["values"]):
                if k.startswith(strip):
                    del f["values"][k]
    return da == db


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--config", required=True, choices=sorted(CONFIGS))
    r = sub.add_parser("reshard")
    r.add_argument("--config", required=True, choices=sorted(CONFIGS))
    r.add_argument("--target", required=True)
    r.add_argument("--source", help="default CONFIG/fully_reshardable")
    r.add_argument("--model-only", metavar="DIR",
                   help="also save the model alone (no optimizer) in the legacy form to DIR")
    w = sub.add_parser("world", help="number of processes of a config or target")
    w.add_argument("spec")
    d = sub.add_parser("describe")
    d.add_argument("work")
    d.add_argument("out")
    d.add_argument("names", nargs="+")
    d.add_argument("--tag", default="", help="prefix of the fixture directories (t210_)")
    op = sub.add_parser("oracle-pairs", help="the (source, target) pairs of the oracle")
    o = sub.add_parser("oracle")
    o.add_argument("work")
    o.add_argument("out")
    for x in (op, o):
        x.add_argument("--set", default="oracle.json", choices=sorted(ORACLE_SETS),
                       help="which oracle file (oracle_moe.json: the MoE fixture at the same EP)")
    opts = ap.parse_args()
    if opts.cmd == "world":
        fam = CONFIGS[opts.spec]["family"] if opts.spec in CONFIGS else "a"
        c = target_layout(fam, opts.spec)
        print(c["tp"] * c["pp"] * c["dp"])
        return
    if opts.cmd == "oracle-pairs":
        for a, b in ORACLE_SETS[opts.set]:
            print(a, b, MODEL_ONLY_FIXTURES.get((a, b), "-"))
        return
    {"train": cmd_train, "reshard": cmd_reshard, "describe": cmd_describe,
     "oracle": cmd_oracle}[opts.cmd](opts)


if __name__ == "__main__":
    main()
