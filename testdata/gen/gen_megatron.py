#!/usr/bin/env python3
"""Megatron-LM legacy `torch` checkpoints (model_optim_rng.pt) written by Megatron itself on CPU.

Driver: testdata/gen/run_megatron.sh (read it and README_megatron.md first).

    gen_megatron.py train --layout NAME      # under torchrun, cwd = the work directory
    gen_megatron.py describe WORK OUT        # checks across layouts, writes OUT/<layout>/expected.json
                                             # and OUT/gpt2style_tp2/logits.json

`train` runs Megatron-LM's own training code (megatron/training at tag core_v0.16.1 on top of the
megatron-core 0.16.1 wheel): parse_args + validate_args, initialize_model_parallel (gloo),
the seed procedure of initialize_megatron, get_model (GPTModel from gpt_builders.py /
model_provider.py, DDP and Float16Module wrappers), get_megatron_optimizer,
get_optimizer_param_scheduler, load_checkpoint, and save_checkpoint with --ckpt-format torch.
gen_megatron_cpu.py maps CUDA device placement to the CPU (see there); nothing else is patched.

Every llama-family layout holds the weights of one logical model: `tp1` is built directly
(seed 1234) and also saved with --ckpt-format torch_dist to WORK/ref_dist; every other layout is
built at its own TP/PP/VPP and then loads ref_dist with Megatron's load_checkpoint
(--ckpt-format torch_dist), i.e. megatron-core's dist_checkpointing reshards it; then
args.ckpt_format is set to torch (as --ckpt-convert-format torch does) and save_checkpoint writes
the legacy files. `tp4_ng2` needs a 512-row vocabulary, so it loads WORK/ref512_dist, written by
the helper layout `ref512` (TP1 model with --make-vocab-size-divisible-by 512 filled from tp1,
rows 256..511 = row 255, as tools/checkpoint/saver_base.py pad_weight extends a table).
Helper layouts (not committed): ref512, gpt2style_tp1 (TP1 master of gpt2style_tp2; its forward
gives gpt2style_tp2/logits.json once describe has checked its weights against the merged
gpt2style_tp2 files), hf_llama_tiny_tp1 (hf/llama_tiny mapped into Megatron's model: the hf2mcore
oracle).
"""

import argparse
import hashlib
import json
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ITERATION = 10
GLOBAL_BATCH = 2
SEED = 1234
LOGITS_INPUT_IDS = [1, 17, 42, 99, 150, 3, 199, 64]

COMMON = [
    "--num-layers", "4", "--hidden-size", "64", "--ffn-hidden-size", "96",
    "--num-attention-heads", "4", "--kv-channels", "16",
    "--seq-length", "32", "--max-position-embeddings", "32",
    "--vocab-size", "200", "--tokenizer-type", "NullTokenizer",
    "--use-cpu-initialization", "--transformer-impl", "local",
    "--init-method-std", "0.02", "--seed", str(SEED),
    "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
    "--micro-batch-size", "1", "--global-batch-size", str(GLOBAL_BATCH), "--train-iters", "10",
    "--lr", "3e-4", "--min-lr", "3e-5", "--lr-decay-style", "cosine", "--weight-decay", "0.1",
    "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--adam-eps", "1e-8", "--clip-grad", "1.0",
    "--save-interval", "10", "--ckpt-format", "torch", "--distributed-backend", "gloo",
    # no fused CUDA kernels on the CPU
    "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-swiglu-fusion",
    "--no-bias-gelu-fusion", "--no-rope-fusion", "--no-bias-dropout-fusion",
    "--no-persist-layer-norm",
]
LLAMA = [
    "--group-query-attention", "--num-query-groups", "2",
    "--position-embedding-type", "rope", "--rotary-base", "10000",
    "--normalization", "RMSNorm", "--norm-epsilon", "1e-5", "--swiglu", "--disable-bias-linear",
    "--untie-embeddings-and-output-weights",
]
# GPT-2 style: LayerNorm with bias, linear biases, learned absolute positions, tied embeddings,
# QK layernorm, GeLU MLP, MHA (no --group-query-attention: args.num_query_groups defaults to
# None in 0.16.1 (1 up to 0.15); training.py num_floating_point_operations, called every
# iteration and here before saving, sets it to num_attention_heads = 4 when not GQA).
GPT2 = [
    "--position-embedding-type", "learned_absolute", "--normalization", "LayerNorm",
    "--norm-epsilon", "1e-5", "--qk-layernorm",
]

# name: (family, tp, pp, layers per virtual stage, bf16, optimizer steps, load, vocab divisor)
LAYOUTS = {
    "tp1": ("llama", 1, 1, None, False, 0, None, 128),
    "tp2": ("llama", 2, 1, None, False, 0, "ref_dist", 128),
    "pp2": ("llama", 1, 2, None, False, 0, "ref_dist", 128),
    "tp2pp2": ("llama", 2, 2, None, False, 0, "ref_dist", 128),
    "tp4_ng2": ("llama", 4, 1, None, False, 0, "ref512_dist", 128),
    "tp2_bf16": ("llama", 2, 1, None, True, 0, "ref_dist", 128),
    "pp2_vpp2": ("llama", 1, 2, 1, False, 0, "ref_dist", 128),
    "tp1_optim": ("llama", 1, 1, None, False, 2, "ref_dist", 128),
    "tp2_optim": ("llama", 2, 1, None, False, 2, "ref_dist", 128),
    "tp2pp2_bf16_optim": ("llama", 2, 2, None, True, 2, "ref_dist", 128),
    "gpt2style_tp2": ("gpt2", 2, 1, None, False, 0, None, 128),
    # torch_dist twins (megatron-core dist_checkpointing.save): the weights of tp1, tp2 and
    # tp2_bf16, loaded from ref_dist and saved with --ckpt-format torch_dist (the plain
    # optimizer's torch_dist twin is distopt/a_tp2pp1dp1_plain: gen_megatron_distopt.py)
    "dist_tp1": ("llama", 1, 1, None, False, 0, "ref_dist", 128),
    "dist_tp2": ("llama", 2, 1, None, False, 0, "ref_dist", 128),
    "dist_tp2_bf16": ("llama", 2, 1, None, True, 0, "ref_dist", 128),
    # megatron-core loading what ckptconv wrote (`reshard --to torch_dist` of tp2, in
    # WORK/ours_dist) at two other layouts; run by run_megatron.sh load-ours, not committed
    "load_ours_tp1": ("llama", 1, 1, None, False, 0, "ours_dist", 128),
    "load_ours_tp2pp2": ("llama", 2, 2, None, False, 0, "ours_dist", 128),
    # helpers, not committed
    "ref512": ("llama", 1, 1, None, False, 0, None, 512),
    "gpt2style_tp1": ("gpt2", 1, 1, None, False, 0, None, 128),
    "hf_llama_tiny_tp1": ("llama", 1, 1, None, False, 0, None, 128),
}
DIST = [k for k in LAYOUTS if k.startswith("dist_")]
LOAD_OURS = [k for k in LAYOUTS if k.startswith("load_ours_")]
# trained and checked against (tp2_optim holds its exact TP2 slices) but no longer committed:
# the distributed-optimizer fixtures needed its 2 MB of testdata
WORK_ONLY = ["tp1_optim"]
COMMITTED = [k for k in LAYOUTS
             if k not in ["ref512", "gpt2style_tp1", "hf_llama_tiny_tp1"] + DIST + LOAD_OURS + WORK_ONLY]


def megatron_argv(name):
    fam, tp, pp, vpl, bf16, steps, load, div = LAYOUTS[name]
    argv = list(COMMON) + (LLAMA if fam == "llama" else GPT2)
    argv += ["--make-vocab-size-divisible-by", str(div)]
    argv += ["--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp)]
    if vpl:
        argv += ["--num-layers-per-virtual-pipeline-stage", str(vpl)]
    if bf16:
        argv += ["--bf16"]
    if not steps:
        argv += ["--no-save-optim"]
    argv += ["--save", name]
    if load:
        # load the torch_dist reference; the format is switched to torch before saving, as
        # setup_model_and_optimizer does for --ckpt-convert-format
        argv[argv.index("--ckpt-format") + 1] = "torch_dist"
        argv += ["--load", load, "--no-load-optim", "--no-load-rng"]
    return argv


# ----------------------------------------------------------------------------------------------
# Layout rules (megatron.md §3-§5), used to check Megatron's output against full tensors.

COL_DIM0 = ("embedding.word_embeddings.weight", "output_layer.weight",
            "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias",
            "mlp.linear_fc1.weight", "mlp.linear_fc1.bias")
ROW_DIM1 = ("self_attention.linear_proj.weight", "mlp.linear_fc2.weight")


def split_kind(key):
    if key.endswith(ROW_DIM1):
        return "row"
    if key.endswith(("mlp.linear_fc1.weight", "mlp.linear_fc1.bias")):
        return "fc1"  # SwiGLU special-cased by the caller
    if key.endswith(COL_DIM0):
        return "col"
    return "rep"


def tp_slice(key, full, tp, rank, swiglu):
    kind = split_kind(key)
    if kind == "rep":
        return full
    if kind == "row":
        return full.chunk(tp, dim=1)[rank]
    if kind == "fc1" and swiglu:
        gate, up = full.chunk(2, dim=0)
        return torch.cat([gate.chunk(tp, dim=0)[rank], up.chunk(tp, dim=0)[rank]], dim=0)
    return full.chunk(tp, dim=0)[rank]


def tp_merge(key, parts, swiglu):
    kind = split_kind(key)
    if kind == "rep":
        for p in parts[1:]:
            assert torch.equal(p, parts[0]), f"replicated {key} differs between TP ranks"
        return parts[0]
    if kind == "row":
        return torch.cat(parts, dim=1)
    if kind == "fc1" and swiglu:
        halves = [p.chunk(2, dim=0) for p in parts]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
    return torch.cat(parts, dim=0)


LAYER_RE = re.compile(r"^decoder\.layers\.(\d+)\.")


def global_key(key, offset):
    m = LAYER_RE.match(key)
    if not m:
        return key
    return f"decoder.layers.{int(m.group(1)) + offset}." + key[m.end():]


def layer_offset(num_layers, pp, vp, pp_rank, vp_rank):
    """megatron-core get_transformer_layer_offset, even split (megatron.md §5)."""
    if vp is None:
        return pp_rank * (num_layers // pp)
    return vp_rank * (num_layers // vp) + pp_rank * (num_layers // (pp * vp))


def fake_grad(gkey, shape):
    """Fixed fake gradient of a full (TP1, global-name) parameter: N(0, 1e-3^2), seeded by name."""
    seed = int.from_bytes(hashlib.sha256(gkey.encode()).digest()[:8], "little") & ((1 << 63) - 1)
    g = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), generator=g, dtype=torch.float32) * 1e-3


# ----------------------------------------------------------------------------------------------
# HF LLaMA <-> Megatron (megatron.md §4.1, §4.2, §7)


def hf_to_mcore(hf, nh, ng, d, vp):
    """HF LlamaForCausalLM tensors -> Megatron TP1 (local spec) tensors; vocab padded to vp rows by
    replicating the last row (tools/checkpoint/saver_base.py pad_weight)."""
    r = nh // ng
    out = {}

    def pad(t):
        return torch.cat([t, t[-1:].expand(vp - t.shape[0], -1)])

    out["embedding.word_embeddings.weight"] = pad(hf["model.embed_tokens.weight"])
    i = 0
    while f"model.layers.{i}.input_layernorm.weight" in hf:
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        q = hf[h + "self_attn.q_proj.weight"]
        k = hf[h + "self_attn.k_proj.weight"]
        v = hf[h + "self_attn.v_proj.weight"]
        hid = q.shape[1]
        qkv = torch.cat([q.reshape(ng, r * d, hid), k.reshape(ng, d, hid), v.reshape(ng, d, hid)], dim=1)
        out[m + "input_layernorm.weight"] = hf[h + "input_layernorm.weight"]
        out[m + "self_attention.linear_proj.weight"] = hf[h + "self_attn.o_proj.weight"]
        out[m + "self_attention.linear_qkv.weight"] = qkv.reshape(-1, hid)
        out[m + "pre_mlp_layernorm.weight"] = hf[h + "post_attention_layernorm.weight"]
        out[m + "mlp.linear_fc1.weight"] = torch.cat([hf[h + "mlp.gate_proj.weight"],
                                                      hf[h + "mlp.up_proj.weight"]], dim=0)
        out[m + "mlp.linear_fc2.weight"] = hf[h + "mlp.down_proj.weight"]
        i += 1
    out["decoder.final_layernorm.weight"] = hf["model.norm.weight"]
    out["output_layer.weight"] = pad(hf["lm_head.weight"])
    return out


def mcore_to_hf(full, nh, ng, d, vocab):
    """Megatron TP1 (merged) tensors -> HF LlamaForCausalLM state dict (first `vocab` rows)."""
    r = nh // ng
    out = {"model.embed_tokens.weight": full["embedding.word_embeddings.weight"][:vocab]}
    i = 0
    while f"decoder.layers.{i}.input_layernorm.weight" in full:
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        qkv = full[m + "self_attention.linear_qkv.weight"]
        hid = qkv.shape[1]
        g = qkv.reshape(ng, (r + 2) * d, hid)
        out[h + "self_attn.q_proj.weight"] = g[:, :r * d].reshape(nh * d, hid)
        out[h + "self_attn.k_proj.weight"] = g[:, r * d:(r + 1) * d].reshape(ng * d, hid)
        out[h + "self_attn.v_proj.weight"] = g[:, (r + 1) * d:].reshape(ng * d, hid)
        out[h + "self_attn.o_proj.weight"] = full[m + "self_attention.linear_proj.weight"]
        out[h + "input_layernorm.weight"] = full[m + "input_layernorm.weight"]
        out[h + "post_attention_layernorm.weight"] = full[m + "pre_mlp_layernorm.weight"]
        gate, up = full[m + "mlp.linear_fc1.weight"].chunk(2, dim=0)
        out[h + "mlp.gate_proj.weight"] = gate
        out[h + "mlp.up_proj.weight"] = up
        out[h + "mlp.down_proj.weight"] = full[m + "mlp.linear_fc2.weight"]
        i += 1
    out["model.norm.weight"] = full["decoder.final_layernorm.weight"]
    out["lm_head.weight"] = full["output_layer.weight"][:vocab]
    return out


def load_hf_dir(hf_dir):
    from safetensors.torch import load_file
    index = json.load(open(os.path.join(hf_dir, "model.safetensors.index.json")))
    hf = {}
    for fn in sorted(set(index["weight_map"].values())):
        hf.update(load_file(os.path.join(hf_dir, fn)))
    return hf


def megatron_logits(gpt, ids):
    """Megatron's own GPTModel.forward on the CPU: eval mode, dropout 0, causal mask built by the
    attention (attention_mask None); [len(ids), Vp] float32."""
    gpt.eval()
    ids = torch.tensor([ids], dtype=torch.long)
    pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0)
    with torch.no_grad():
        logits = gpt(input_ids=ids, position_ids=pos, attention_mask=None)
    return logits.float()[0]


LOGITS_PRODUCER = ("megatron-core 0.16.1 GPTModel.forward (local spec) on CPU, eval mode, dropout 0, "
                   "attention_mask None (causal), fp32")
LOGITS_NOTE = ("logits[i][v] for token position i and vocabulary row v (all Vp rows, padding rows "
               "included); float32 values written with Python repr")


def write_logits_json(path, logits, producer, note, padded_vocab, vocab):
    with open(path, "w") as f:
        json.dump({
            "producer": producer,
            "input_ids": LOGITS_INPUT_IDS,
            "position_ids": list(range(len(LOGITS_INPUT_IDS))),
            "shape": list(logits.shape),
            "padded_vocab_size": padded_vocab,
            "true_vocab_size": vocab,
            "note": note,
            "logits": [[float(x) for x in row] for row in logits.tolist()],
        }, f, indent=0)
        f.write("\n")


def reference_gpt2_logits(full, a, ids):
    """Plain-torch forward of a merged (TP1) GPT-2 style Megatron model (LayerNorm with bias,
    learned absolute positions, MHA with biases and QK layernorm over each head, exact-erf GeLU
    MLP, pre-norm residuals, tied output layer), written from the model definition and independent
    of megatron-core; fp64. Returns [len(ids), Vp]."""
    import torch.nn.functional as F

    t = {k: v.to(torch.float64) for k, v in full.items()}
    eps, nh, d = a.layernorm_epsilon, a.num_attention_heads, a.kv_channels
    assert not a.group_query_attention and a.num_query_groups == nh
    n = len(ids)

    def ln(x, pfx):
        return F.layer_norm(x, x.shape[-1:], t[pfx + ".weight"], t[pfx + ".bias"], eps)

    def lin(x, pfx):
        return x @ t[pfx + ".weight"].T + t[pfx + ".bias"]

    x = t["embedding.word_embeddings.weight"][ids] + t["embedding.position_embeddings.weight"][:n]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for i in range(a.num_layers):
        p = f"decoder.layers.{i}."
        qkv = lin(ln(x, p + "input_layernorm"), p + "self_attention.linear_qkv")
        # per head (query group) h: rows [q_h (d); k_h (d); v_h (d)] of linear_qkv (megatron.md §4)
        q, k, v = qkv.view(n, nh, 3 * d).split(d, dim=-1)
        q = ln(q, p + "self_attention.q_layernorm")
        k = ln(k, p + "self_attention.k_layernorm")
        s = torch.einsum("ihd,jhd->hij", q, k) / d ** 0.5
        s = s.masked_fill(~causal, float("-inf")).softmax(-1)
        o = torch.einsum("hij,jhd->ihd", s, v).reshape(n, nh * d)
        x = x + lin(o, p + "self_attention.linear_proj")
        h = F.gelu(lin(ln(x, p + "pre_mlp_layernorm"), p + "mlp.linear_fc1"))
        x = x + lin(h, p + "mlp.linear_fc2")
    return ln(x, "decoder.final_layernorm") @ t["embedding.word_embeddings.weight"].T


def max_abs_diff(a, b):
    return float((torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max())


# ----------------------------------------------------------------------------------------------
# train


def chunk_global_keys(chunk):
    """{local state-dict key: global key} for one unwrapped GPTModel chunk (layer_number is global)."""
    out = {}
    for key in chunk.state_dict().keys():
        m = LAYER_RE.match(key)
        if m:
            layer = chunk.decoder.layers[int(m.group(1))]
            out[key] = global_key(key, layer.layer_number - 1 - int(m.group(1)))
        else:
            out[key] = key
    return out


def init_megatron():
    """initialize_megatron(), CPU edition (same order, same calls) for the command line already in
    sys.argv; returns Megatron's args. The caller has installed gen_megatron_cpu."""
    import torch.distributed as dist

    from megatron.core import mpu, tensor_parallel
    from megatron.core.rerun_state_machine import (RerunDiagnostic, RerunErrorInjector, RerunMode,
                                                   initialize_rerun_state_machine)
    from megatron.training import initialize as minit
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.global_vars import get_args, set_global_variables

    args = parse_args()
    validate_args(args, {})
    set_global_variables(args)
    args = get_args()
    initialize_rerun_state_machine(
        state_save_func=lambda: {"rng_tracker_states": tensor_parallel.get_cuda_rng_tracker().get_states()},
        state_restore_func=lambda sd: None,
        mode=RerunMode(args.rerun_mode),
        error_injector=RerunErrorInjector(error_injection_rate=args.error_injection_rate,
                                          error_injection_type=RerunDiagnostic(args.error_injection_type)),
        result_rejected_tracker_filename=args.result_rejected_tracker_filename,
    )
    dist.init_process_group(backend=args.distributed_backend, world_size=args.world_size, rank=args.rank)
    # _initialize_distributed() skips this when torch.cuda.device_count() == 0; same arguments.
    mpu.initialize_model_parallel(
        args.tensor_model_parallel_size, args.pipeline_model_parallel_size,
        args.virtual_pipeline_model_parallel_size,
        pipeline_model_parallel_comm_backend=args.pipeline_model_parallel_comm_backend,
        context_parallel_size=args.context_parallel_size,
        expert_model_parallel_size=args.expert_model_parallel_size,
        num_distributed_optimizer_instances=args.num_distributed_optimizer_instances,
        expert_tensor_parallel_size=args.expert_tensor_parallel_size,
        distributed_timeout_minutes=args.distributed_timeout_minutes,
        order="tp-cp-ep-dp-pp" if not args.use_tp_pp_dp_mapping else "tp-cp-ep-pp-dp",
        create_gloo_process_groups=args.enable_gloo_process_groups,
    )
    # _set_random_seed() calls model_parallel_cuda_manual_seed only if device_count() > 0.
    real_count = torch.cuda.device_count
    torch.cuda.device_count = lambda: 1
    try:
        minit._set_random_seed(args.seed, args.data_parallel_random_init, args.te_rng_tracker,
                               args.inference_rng_tracker)
    finally:
        torch.cuda.device_count = real_count
    return args


def cmd_train(opts):
    import gen_megatron_cpu as shim

    shim.install()
    name = opts.layout
    fam, tp, pp, vpl, bf16, steps, load, div = LAYOUTS[name]
    swiglu = fam == "llama"
    sys.argv = ["pretrain_gpt.py"] + megatron_argv(name)

    from functools import partial

    import torch.distributed as dist

    from megatron.core import mpu
    from megatron.core.enums import ModelType
    from megatron.training.checkpointing import load_checkpoint, save_checkpoint
    from megatron.training.training import (num_floating_point_operations,
                                            setup_model_and_optimizer)
    from megatron.training.utils import unwrap_model, update_use_dist_ckpt

    from gpt_builders import gpt_builder
    from model_provider import model_provider

    args = init_megatron()

    tp_rank = mpu.get_tensor_model_parallel_rank()
    pp_rank = mpu.get_pipeline_model_parallel_rank()
    rank = dist.get_rank()

    # --- model, optimizer, scheduler (load_checkpoint is called below, after the init checks)
    load_dir = args.load
    args.load = None
    model, optimizer, sched = setup_model_and_optimizer(partial(model_provider, gpt_builder),
                                                        ModelType.encoder_or_decoder)
    args.load = load_dir
    chunks = unwrap_model(model)
    meta = {"layout": name, "rank": rank, "tp_rank": tp_rank, "pp_rank": pp_rank,
            "optimizer_class": type(optimizer).__name__,
            "inner_optimizers": [type(o).__name__ for o in optimizer.chained_optimizers],
            "torch_optimizer": [type(o.optimizer).__name__ for o in optimizer.chained_optimizers],
            "checks": []}

    def local_state(chunk):
        return {k: v for k, v in chunk.state_dict().items() if isinstance(v, torch.Tensor)}

    # Direct initialisation: with --use-cpu-initialization and one seed, a TP shard is a slice of
    # the TP1 master (only without PP: stage seeds differ by 100 * pp_rank; not for tp4_ng2,
    # whose 512-row vocabulary shifts the random stream).
    if opts.init_full:
        ref = torch.load(opts.init_full, weights_only=True)
        n = 0
        for chunk in chunks:
            for k, v in local_state(chunk).items():
                want = tp_slice(k, ref[k], tp, tp_rank, swiglu).to(v.dtype)
                assert torch.equal(v, want), f"direct init: {k} is not the TP slice of the TP1 master"
                n += 1
        meta["checks"].append(f"direct init at TP{tp}: {n} tensors equal the TP slices of the "
                              f"TP1 initialisation ({opts.init_full})")
    if name in ("tp1", "gpt2style_tp1"):
        torch.save({k: v.detach().clone() for k, v in local_state(chunks[0]).items()},
                   f"{name}_init_full.pt")

    if not load_dir and name not in ("ref512", "hf_llama_tiny_tp1"):
        # Megatron initialises norm weights to 1 and biases to 0; shift every 1-D parameter by
        # N(0, 0.05^2) (full tensor seeded by its global name, TP-sliced) so that no two of them
        # are equal, as after training.
        n = 0
        with torch.no_grad():
            for chunk in chunks:
                gk = chunk_global_keys(chunk)
                for k, p in chunk.named_parameters():
                    if p.dim() != 1:
                        continue
                    full_shape = [p.shape[0] * (tp if split_kind(k) in ("col", "fc1") else 1)]
                    d = fake_grad(f"{gk[k]}@perturb", full_shape) * 50.0
                    p.add_(tp_slice(k, d, tp, tp_rank, swiglu).to(p.dtype))
                    n += 1
        meta["checks"].append(f"{n} 1-D parameters (norm weights, biases) shifted by N(0, 0.05^2)")

    if load_dir:
        it, _ = load_checkpoint(model, optimizer, sched)
        meta["loaded_from"] = load_dir
        meta["checks"].append(f"load_checkpoint({load_dir}, torch_dist) -> iteration {it}")
        if name not in DIST:
            # training.py setup_model_and_optimizer, "Convert checkpoint format": save as torch
            args.ckpt_format = "torch"
            update_use_dist_ckpt(args)

    if name == "ref512":
        # fill the 512-row model from tp1 (pad rows replicate row 255, saver_base.pad_weight)
        ref = torch.load(opts.ref_full, weights_only=True)
        with torch.no_grad():
            for k, p in chunks[0].named_parameters():
                full = ref[k]
                if full.shape != p.shape:
                    full = torch.cat([full, full[-1:].expand(p.shape[0] - full.shape[0], -1)])
                p.copy_(full)
    elif opts.ref_full:
        ref = torch.load(opts.ref_full, weights_only=True)
        n = 0
        for chunk in chunks:
            gk = chunk_global_keys(chunk)
            for k, v in local_state(chunk).items():
                full = ref[gk[k]]
                if name == "tp4_ng2" and k.endswith(("word_embeddings.weight", "output_layer.weight")):
                    full = torch.cat([full, full[-1:].expand(args.padded_vocab_size - full.shape[0], -1)])
                want = tp_slice(k, full, tp, tp_rank, swiglu).to(v.dtype)
                assert torch.equal(v, want), f"{k} ({gk[k]}) differs from the reference slice"
                n += 1
        meta["checks"].append(f"{n} tensors equal the TP{tp} slices of the reference {opts.ref_full} "
                              "(global layer ids)")

    # --- optimizer steps on fixed fake gradients (full gradient per global name, TP-sliced),
    # in the order of training.py train_step; the fake gradients stand in for the backward pass
    # of forward_backward_func, which then calls finalize_model_grads (DP all-reduce).
    if steps:
        from megatron.core.distributed import finalize_model_grads
        from megatron.core.num_microbatches_calculator import get_num_microbatches
        from megatron.core.rerun_state_machine import get_rerun_state_machine

        rsm = get_rerun_state_machine()
        for step in range(steps):
            while rsm.should_run_forward_backward(None):
                for m in model:
                    m.zero_grad_buffer()
                optimizer.zero_grad()
                for m, chunk in zip(model, chunks):
                    gk = chunk_global_keys(chunk)
                    by_param = {id(p): k for k, p in chunk.named_parameters()}
                    for p in m.parameters():
                        k = by_param[id(p)]
                        full_shape = list(p.shape)
                        kind = split_kind(k)
                        if kind in ("col", "fc1"):
                            full_shape[0] *= tp
                        elif kind == "row":
                            full_shape[1] *= tp
                        g = fake_grad(f"{gk[k]}@step{step}", full_shape)
                        p.main_grad.copy_(tp_slice(k, g, tp, tp_rank, swiglu))
                finalize_model_grads(model)
            _, should_exit, _ = rsm.should_checkpoint_and_exit()
            assert not should_exit
            ok, grad_norm, _ = optimizer.step()
            assert ok
            increment = get_num_microbatches() * args.micro_batch_size * args.data_parallel_size
            sched.step(increment=increment)
            meta["checks"].append(f"step {step + 1}: grad norm {grad_norm!r} (clip-grad 1.0: no clipping)")
            assert grad_norm < 1.0
        # optimizer index -> model parameter name (torch's state_dict numbers params in group order)
        opt = optimizer.chained_optimizers[0]
        names = {}
        for ci, chunk in enumerate(chunks):
            for k, p in chunk.named_parameters():
                names[id(p)] = (f"model{ci}/" if len(chunks) > 1 else "") + k
        if hasattr(opt, "float16_groups"):
            model_params = [p for g in opt.float16_groups for p in g]
            assert all(len(g) == 0 for g in opt.fp32_from_fp32_groups)
        else:
            model_params = [p for g in opt.optimizer.param_groups for p in g["params"]]
        meta["optimizer_param_names"] = [names[id(p)] for p in model_params]
        meta["param_group_sizes"] = [len(g["params"]) for g in opt.optimizer.param_groups]

    # --- what a run ending at iteration 10 records
    args.iteration = ITERATION
    args.consumed_train_samples = ITERATION * args.global_batch_size
    flops = ITERATION * num_floating_point_operations(args, args.global_batch_size)
    save_checkpoint(ITERATION, model, optimizer, sched, flops)
    meta["num_floating_point_operations_so_far"] = flops

    if name in ("tp1", "gpt2style_tp1", "ref512"):
        full = {k: v.detach().clone() for k, v in local_state(chunks[0]).items()}
        torch.save(full, f"{name}_full.pt")
    if name in ("tp1", "ref512"):
        # the reference for every other llama layout, in megatron-core's torch_dist format
        saved = (args.ckpt_format, args.save, args.no_save_optim, args.no_save_rng)
        ref_dir = "ref_dist" if name == "tp1" else "ref512_dist"
        args.ckpt_format, args.save, args.no_save_optim, args.no_save_rng = (
            "torch_dist", ref_dir, True, True)
        update_use_dist_ckpt(args)
        save_checkpoint(ITERATION, model, None, None, flops)
        args.ckpt_format, args.save, args.no_save_optim, args.no_save_rng = saved
        update_use_dist_ckpt(args)
        meta["checks"].append(f"saved torch_dist reference {ref_dir}")

    if name == "tp1":
        logits = megatron_logits(chunks[0], LOGITS_INPUT_IDS)
        write_logits_json(os.path.join(name, "logits.json"), logits, LOGITS_PRODUCER, LOGITS_NOTE,
                          args.padded_vocab_size, args.vocab_size)
        meta["checks"].append(f"logits {tuple(logits.shape)} written to tp1/logits.json")

    if name == "gpt2style_tp1":
        # Megatron's forward of the TP1 master of gpt2style_tp2, with the exact weights it ran on;
        # describe checks those against the merged gpt2style_tp2 files before it writes
        # gpt2style_tp2/logits.json.
        weights = {k: v.detach().clone() for k, v in local_state(chunks[0]).items()}
        logits = megatron_logits(chunks[0], LOGITS_INPUT_IDS)
        for k, v in local_state(chunks[0]).items():
            assert torch.equal(v, weights[k]), f"{k} changed during the forward"
        torch.save({"logits": logits, "weights": weights,
                    "padded_vocab_size": args.padded_vocab_size, "true_vocab_size": args.vocab_size},
                   f"{name}_logits.pt")
        meta["checks"].append(f"logits {tuple(logits.shape)} of Megatron's forward saved to "
                              f"{name}_logits.pt with the {len(weights)} weight tensors it ran on")

    if name == "hf_llama_tiny_tp1":
        # hf2mcore oracle: HF weights mapped by megatron.md §7 into Megatron's own model
        hf = load_hf_dir(opts.hf_dir)
        conv = hf_to_mcore(hf, args.num_attention_heads, args.num_query_groups, args.kv_channels,
                           args.padded_vocab_size)
        with torch.no_grad():
            params = dict(chunks[0].named_parameters())
            assert set(params) == set(conv), set(params) ^ set(conv)
            for k, p in params.items():
                p.copy_(conv[k])
        logits = megatron_logits(chunks[0], LOGITS_INPUT_IDS)
        ref = json.load(open(os.path.join(opts.hf_dir, "logits.json")))
        vocab = len(ref["logits"][0])
        diff = max_abs_diff(logits[:, :vocab], ref["logits"])
        assert diff < 1e-4, diff
        meta["hf2mcore_tp1"] = {
            "mapping": "megatron.md §7 (q/k/v interleaved per query group, fc1 = cat(gate, up), "
                       "vocab rows 200..255 = row 199 as tools/checkpoint/saver_base.py pad_weight)",
            "megatron_forward_vs_hf_logits_max_abs_diff": diff,
            "tensors": [trec(k, v) for k, v in local_state(chunks[0]).items()],
        }
        meta["checks"].append(f"Megatron forward of the converted HF weights matches the HF logits "
                              f"(max |diff| {diff:.3g})")

    with open(f"{name}.meta.rank{rank}.json", "w") as f:
        json.dump(meta, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------
# describe


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def trec(name, t):
    return {"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
            "sha256": hashlib.sha256(tensor_bytes(t)).hexdigest()}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    return h.hexdigest()


ARG_FIELDS = [
    "tensor_model_parallel_size", "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage",
    "num_virtual_stages_per_pipeline_rank", "expert_model_parallel_size", "context_parallel_size",
    "sequence_parallel", "data_parallel_size", "world_size",
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
    "group_query_attention", "kv_channels", "padded_vocab_size", "make_vocab_size_divisible_by",
    "vocab_size", "tokenizer_type", "max_position_embeddings", "seq_length",
    "position_embedding_type", "rotary_base", "rotary_percent", "rotary_interleaved",
    "normalization", "norm_epsilon", "layernorm_epsilon", "apply_layernorm_1p",
    "layernorm_zero_centered_gamma", "qk_layernorm", "swiglu", "add_position_embedding",
    "add_bias_linear", "add_qkv_bias", "untie_embeddings_and_output_weights",
    "transformer_impl", "params_dtype", "bf16", "fp16", "accumulate_allreduce_grads_in_fp32",
    "iteration", "consumed_train_samples", "consumed_valid_samples", "train_iters",
    "global_batch_size", "micro_batch_size", "use_distributed_optimizer", "ckpt_format",
    "use_dist_ckpt", "no_save_optim", "no_save_rng", "save", "load", "optimizer", "lr", "min_lr",
    "weight_decay", "adam_beta1", "adam_beta2", "adam_eps", "clip_grad", "lr_decay_style",
    "seed", "init_method_std", "use_cpu_initialization",
]


def jsonable(v):
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return repr(v)


def describe_optimizer(o, names):
    """state_dict['optimizer'] of a ChainedOptimizer holding one FP32Optimizer or one
    Float16OptimizerWithFloat16Params (torch.optim.AdamW inside)."""
    out = {}
    if "fp32_from_fp16_params" in o:
        out["kind"] = "Float16OptimizerWithFloat16Params"
        out["top_keys"] = list(o.keys())
        inner = o["optimizer"]
    else:
        out["kind"] = "FP32Optimizer"
        inner = o
    out["inner_keys"] = list(inner.keys())
    groups = []
    for g in inner["param_groups"]:
        d = {k: jsonable(v) for k, v in g.items() if k != "params"}
        d["params"] = list(g["params"])
        d["param_names"] = [names[i] for i in g["params"]]
        d["key_order"] = list(g.keys())
        groups.append(d)
    out["param_groups"] = groups
    st = []
    for idx, s in inner["state"].items():
        r = {"index": idx, "name": names[idx], "keys": list(s.keys())}
        for k, v in s.items():
            if k == "step":
                r["step"] = {"value": float(v), "dtype": dtype_name(v.dtype), "shape": list(v.shape)}
            else:
                r[k] = trec(f"{idx}/{k}", v)
        st.append(r)
    out["state"] = st
    if "fp32_from_fp16_params" in o:
        out["fp32_from_fp16_params"] = [
            [dict(trec(f"{gi}/{pi}", t), param_name=names[grp["params"][pi]])
             for pi, t in enumerate(g)]
            for gi, (g, grp) in enumerate(zip(o["fp32_from_fp16_params"], inner["param_groups"]))]
        out["grad_scaler"] = "absent (bf16 without --loss-scale: grad_scaler is None)" \
            if "grad_scaler" not in o else jsonable(o["grad_scaler"])
    return out


def rank_files(root):
    it = open(os.path.join(root, "latest_checkpointed_iteration.txt")).read()
    d = os.path.join(root, f"iter_{int(it):07d}")
    files = {}
    for sub in sorted(os.listdir(d)):
        m = re.fullmatch(r"mp_rank_(\d\d)(?:_(\d\d\d))?", sub)
        assert m, sub
        files[(int(m.group(1)), int(m.group(2) or 0))] = os.path.join(d, sub, "model_optim_rng.pt")
    return it, files


def load_pt(path):
    import megatron.core  # noqa: F401  (its import registers Megatron's weights_only allow-list)
    return torch.load(path, map_location="cpu", weights_only=True)


def merge_layout(files, sds):
    """Full (TP1, global layer ids) tensors of a layout, by megatron.md §3-§5."""
    a = next(iter(sds.values()))["args"]
    tp, pp = a.tensor_model_parallel_size, a.pipeline_model_parallel_size
    vp = a.virtual_pipeline_model_parallel_size
    swiglu = a.swiglu
    per_key = {}
    for (t, p), sd in sds.items():
        chunks = [("model", sd["model"])] if "model" in sd else \
            [(f"model{i}", sd[f"model{i}"]) for i in range(vp)]
        for ci, (_, msd) in enumerate(chunks):
            off = layer_offset(a.num_layers, pp, vp, p, ci)
            for k, v in msd.items():
                if isinstance(v, torch.Tensor):
                    per_key.setdefault(global_key(k, off), {})[t] = (k, v)
    full = {}
    for gk, parts in per_key.items():
        assert sorted(parts) == list(range(tp)), gk
        k0 = parts[0][0]
        full[gk] = tp_merge(k0, [parts[t][1] for t in range(tp)], swiglu)
    return full


def cmd_describe(opts):
    import gen_common

    work, out = opts.work, opts.out
    try:
        sys.path.insert(0, os.environ.get("MEGATRON_OVERLAY", ""))
        import megatron.core
        mcore_version = megatron.core.__version__
    except Exception:  # pragma: no cover
        mcore_version = None
    versions = gen_common.versions(torch=torch.__version__, megatron_core=mcore_version,
                                   megatron_lm_training="NVIDIA/Megatron-LM tag core_v0.16.1")
    metas = {}
    for f in sorted(os.listdir(work)):
        m = re.fullmatch(r"(.+)\.meta\.rank(\d+)\.json", f)
        if m:
            metas.setdefault(m.group(1), {})[int(m.group(2))] = json.load(open(os.path.join(work, f)))

    loaded = {}
    fulls = {}
    for name in COMMITTED + WORK_ONLY:
        root = os.path.join(work if name in WORK_ONLY else out, name)
        if not os.path.isdir(root):
            print(f"describe: {name} missing, skipped")
            continue
        it, files = rank_files(root)
        sds = {k: load_pt(p) for k, p in files.items()}
        loaded[name] = (files, sds)
        fulls[name] = merge_layout(files, sds)

    # --- checks across layouts (independent of Megatron: plain state dicts + megatron.md rules)
    checks = {}
    ref = fulls.get("tp1")
    for name, full in fulls.items():
        c = checks.setdefault(name, [])
        if name.startswith("gpt2style") or ref is None:
            continue
        if name.endswith("_optim"):
            continue  # weights changed by the optimizer steps
        assert set(full) == set(ref), (name, set(full) ^ set(ref))
        for k, v in full.items():
            r = ref[k]
            if name == "tp4_ng2" and r.shape != v.shape:
                r = torch.cat([r, r[-1:].expand(v.shape[0] - r.shape[0], -1)])
            assert torch.equal(v, r.to(v.dtype)), f"{name}: merged {k} differs from tp1"
        c.append(f"merged full weights (TP by megatron.md §3-4, PP/VPP offsets §5) equal tp1's "
                 f"({'bf16 rounding of ' if next(iter(full.values())).dtype == torch.bfloat16 else ''}"
                 f"all {len(full)} tensors{', padding rows 256..511 = row 255' if name == 'tp4_ng2' else ''})")
    if "tp1_optim" in loaded and "tp2_optim" in loaded:
        f1, s1 = loaded["tp1_optim"]
        f2, s2 = loaded["tp2_optim"]
        n1 = metas["tp1_optim"][0]["optimizer_param_names"]
        o1 = s1[(0, 0)]["optimizer"]
        byname1 = {n1[i]: st for i, st in o1["state"].items()}
        n = 0
        for t in (0, 1):
            rk = [r for r, m in metas["tp2_optim"].items() if m["tp_rank"] == t][0]
            n2 = metas["tp2_optim"][rk]["optimizer_param_names"]
            o2 = s2[(t, 0)]["optimizer"]
            assert [len(g["params"]) for g in o2["param_groups"]] == \
                [len(g["params"]) for g in o1["param_groups"]]
            assert n2 == n1, "param order differs between TP1 and TP2"
            for i, st in o2["state"].items():
                for key in ("exp_avg", "exp_avg_sq"):
                    want = tp_slice(n2[i], byname1[n2[i]][key], 2, t, True)
                    assert torch.equal(st[key], want), f"tp2_optim rank {t} {n2[i]} {key} not a slice"
                    n += 1
                assert torch.equal(st["step"], byname1[n2[i]]["step"])
            for k, v in s2[(t, 0)]["model"].items():
                if isinstance(v, torch.Tensor):
                    assert torch.equal(v, tp_slice(k, s1[(0, 0)]["model"][k], 2, t, True)), k
        checks["tp2_optim"].append(f"exp_avg/exp_avg_sq of both ranks ({n} tensors), step values and "
                                   "the stepped weights are exact TP slices of tp1_optim's")
    if "tp2pp2_bf16_optim" in loaded:
        files, sds = loaded["tp2pp2_bf16_optim"]
        for key, sd in sds.items():
            masters = [t for g in sd["optimizer"]["fp32_from_fp16_params"] for t in g]
            rk = [r for r, m in metas["tp2pp2_bf16_optim"].items()
                  if (m["tp_rank"], m["pp_rank"]) == key][0]
            names = metas["tp2pp2_bf16_optim"][rk]["optimizer_param_names"]
            for nm, mt in zip(names, masters):
                assert mt.dtype == torch.float32
                assert torch.equal(sd["model"][nm], mt.to(torch.bfloat16)), nm
        checks["tp2pp2_bf16_optim"].append(
            "every bf16 model weight == its fp32_from_fp16_params master rounded to bf16")

    # mcore2hf oracle: tp1 mapped to HF by megatron.md §7, run by transformers, must give
    # Megatron's own logits (tp1/logits.json, written by GPTModel.forward)
    lj = os.path.join(out, "tp1", "logits.json")
    if "tp1" in fulls and os.path.exists(lj):
        import gen_hf_llama
        from transformers import LlamaForCausalLM

        a = loaded["tp1"][1][(0, 0)]["args"]
        hfsd = mcore_to_hf(fulls["tp1"], a.num_attention_heads, a.num_query_groups, a.kv_channels,
                           a.vocab_size)
        hfm = LlamaForCausalLM(gen_hf_llama.config()).to(torch.float32).eval()
        hfm.load_state_dict(hfsd, strict=True)
        with torch.no_grad():
            hl = hfm(input_ids=torch.tensor([LOGITS_INPUT_IDS])).logits[0].float()
        ml = json.load(open(lj))["logits"]
        diff = max_abs_diff(hl, [row[:a.vocab_size] for row in ml])
        assert diff < 1e-4, diff
        checks["tp1"].append(f"mcore2hf: tp1 mapped to LlamaForCausalLM (megatron.md §7, first "
                             f"{a.vocab_size} vocab rows) reproduces logits.json[:, :{a.vocab_size}] "
                             f"(max |diff| {diff:.3g})")
    # gpt2style_tp2/logits.json: Megatron's forward of gpt2style_tp1 (the TP1 master), written
    # only once the weights it ran on are shown to be bit-identical to the merged gpt2style_tp2
    # files; a plain-torch forward of the merged files must agree.
    gl = os.path.join(work, "gpt2style_tp1_logits.pt")
    if "gpt2style_tp2" in fulls and not os.path.exists(gl):
        print(f"describe: {gl} missing, gpt2style_tp2/logits.json not written")
    elif "gpt2style_tp2" in fulls:
        g = torch.load(gl, weights_only=True)
        merged, ran = fulls["gpt2style_tp2"], g["weights"]
        if set(merged) != set(ran):
            raise SystemExit(f"gpt2style_tp2: merged tensors != the forward's: {set(merged) ^ set(ran)}")
        for k, v in merged.items():
            if v.dtype != ran[k].dtype or not torch.equal(v, ran[k]):
                raise SystemExit(f"gpt2style_tp2: merged {k} is not bit-identical to the weight "
                                 "Megatron's forward ran on (gpt2style_tp1)")
        a = loaded["gpt2style_tp2"][1][(0, 0)]["args"]
        logits = g["logits"]
        assert logits.dtype == torch.float32
        assert list(logits.shape) == [len(LOGITS_INPUT_IDS), a.padded_vocab_size]
        assert (g["padded_vocab_size"], g["true_vocab_size"]) == (a.padded_vocab_size, a.vocab_size)
        diff = max_abs_diff(logits, reference_gpt2_logits(merged, a, LOGITS_INPUT_IDS))
        if not diff < 1e-4:
            raise SystemExit(f"gpt2style_tp2: plain-torch forward differs from Megatron's ({diff})")
        write_logits_json(
            os.path.join(out, "gpt2style_tp2", "logits.json"), logits,
            LOGITS_PRODUCER + ", of the TP1 model gpt2style_tp1 (built by Megatron at TP1 with the "
            "same arguments and seed; gpt2style_tp2 holds its TP2 shards)",
            LOGITS_NOTE + f"; the {len(merged)} weight tensors the forward ran on are bit-identical "
            "to the two gpt2style_tp2 rank files merged by megatron.md §3-4 (vocab, linear_qkv and "
            "linear_fc1 weight and bias on dim 0, linear_proj and linear_fc2 weights on dim 1, the "
            "rest replicated and equal on both ranks); output layer tied to "
            "embedding.word_embeddings.weight; a plain-torch fp64 forward of the merged tensors "
            f"agrees to max |diff| {diff:.2g}",
            a.padded_vocab_size, a.vocab_size)
        print(f"describe: gpt2style_tp2/logits.json written ({len(merged)} merged tensors == the "
              f"forward's weights, plain-torch forward max |diff| {diff:.3g})")
    if opts.hf_dir and "hf_llama_tiny_tp1" in metas:
        ej = os.path.join(opts.hf_dir, "expected.json")
        rec = json.load(open(ej))
        rec["hf2mcore_tp1"] = metas["hf_llama_tiny_tp1"][0]["hf2mcore_tp1"]
        gen_common.write_json(ej, rec)
        print(f"describe: {ej}: hf2mcore_tp1 added")

    # --- expected.json per fixture root
    for name, (files, sds) in loaded.items():
        if name in WORK_ONLY:
            continue
        root = os.path.join(out, name)
        it = open(os.path.join(root, "latest_checkpointed_iteration.txt")).read()
        meta = metas.get(name, {})
        rec = {"fixture": name, "versions": versions,
               "latest_checkpointed_iteration.txt": it,
               "megatron_argv": megatron_argv(name),
               "route": None, "checks": checks.get(name, []), "files": {}}
        fam, tp, pp, vpl, bf16, steps, load, div = LAYOUTS[name]
        rec["route"] = (
            "built directly by Megatron (seed 1234, --use-cpu-initialization)" if not load else
            f"built by Megatron at this layout, then Megatron's load_checkpoint of the TP1 torch_dist "
            f"reference ({load}; megatron-core dist_checkpointing reshards)")
        if steps:
            rec["route"] += (f"; {steps} optimizer steps of Megatron's own optimizer "
                             "(get_megatron_optimizer) on fixed fake gradients")
        rec["route"] += "; saved by Megatron's save_checkpoint (--ckpt-format torch)"
        for (t, p), path in sorted(files.items()):
            sd = sds[(t, p)]
            rel = os.path.relpath(path, root)
            rk = [r for r, m in meta.items() if (m["tp_rank"], m["pp_rank"]) == (t, p)]
            m = meta[rk[0]] if rk else {}
            f = {"tp_rank": t, "pp_rank": p, "size": os.path.getsize(path),
                 "sha256": sha256_file(path), "top_keys": list(sd.keys()),
                 "checkpoint_version": sd["checkpoint_version"], "iteration": sd["iteration"],
                 "num_floating_point_operations_so_far": sd["num_floating_point_operations_so_far"],
                 "args": {k: jsonable(getattr(sd["args"], k)) for k in ARG_FIELDS
                          if hasattr(sd["args"], k)},
                 "args_attribute_count": len(vars(sd["args"])),
                 "pickle_globals": gen_common.pickle_globals(gen_common.zip_pickle(path))}
            missing = [k for k in ARG_FIELDS if not hasattr(sd["args"], k)]
            if missing:
                f["args_missing"] = missing
            for mk in [k for k in sd if k == "model" or re.fullmatch(r"model\d+", k)]:
                recs = []
                for k, v in sd[mk].items():
                    if isinstance(v, torch.Tensor):
                        recs.append(trec(k, v))
                    else:
                        recs.append({"name": k, "value": jsonable(v)})
                f[mk] = recs
            if "optimizer" in sd:
                f["optimizer"] = describe_optimizer(sd["optimizer"], m["optimizer_param_names"])
                f["optimizer"]["param_group_rule"] = (
                    "megatron/core/optimizer/__init__.py _get_param_groups: params in "
                    "model_chunk.named_parameters() order; a param matching the standard override "
                    "(name '*.bias' or len(shape)==1) gets {'wd_mult': 0.0}; groups sorted by key, "
                    "None (no override) first -> group 0 = weight-decayed, group 1 = wd_mult 0")
            if "opt_param_scheduler" in sd:
                f["opt_param_scheduler"] = jsonable_dict(sd["opt_param_scheduler"])
            if "rng_state" in sd:
                rs = sd["rng_state"]
                f["rng_state"] = {
                    "len": len(rs), "keys": list(rs[0].keys()),
                    "cuda_rng_state": trec("cuda_rng_state", rs[0]["cuda_rng_state"]),
                    "cuda_rng_state_hex": bytes(rs[0]["cuda_rng_state"].tolist()).hex(),
                    "torch_rng_state": trec("torch_rng_state", rs[0]["torch_rng_state"]),
                    "rng_tracker_states": {k: bytes(v.tolist()).hex()
                                           for k, v in rs[0]["rng_tracker_states"].items()},
                    "numpy_arrays": gen_common.walk_numpy(rs, "rng_state"),
                }
            rec["files"][rel] = f
            if m.get("checks"):
                f["generator_checks"] = m["checks"]
        full = fulls[name]
        rec["merged_full"] = [trec(k, v) for k, v in full.items()]
        gen_common.write_json(os.path.join(root, "expected.json"), rec)
        print(f"describe: {name}: {len(files)} files, checks: {len(rec['checks'])}")
    total = 0
    for dp, _, fs in os.walk(out):
        total += sum(os.path.getsize(os.path.join(dp, f)) for f in fs)
    print(f"describe: {out}: {total} bytes")


def jsonable_dict(d):
    return {k: jsonable(v) for k, v in d.items()}


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--layout", required=True, choices=sorted(LAYOUTS))
    t.add_argument("--hf-dir", default=None, help="testdata/hf/llama_tiny (hf_llama_tiny_tp1)")
    t.add_argument("--init-full", default=None,
                   help="TP1 state dict right after initialisation: check the direct TP init")
    t.add_argument("--ref-full", default=None,
                   help="full TP1 reference state dict (tp1_full.pt): check the final weights")
    d = sub.add_parser("describe")
    d.add_argument("work")
    d.add_argument("out")
    d.add_argument("--hf-dir", default=None)
    opts = ap.parse_args()
    if opts.cmd == "train":
        cmd_train(opts)
    else:
        cmd_describe(opts)


if __name__ == "__main__":
    main()
