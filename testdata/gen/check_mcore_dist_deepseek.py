"""megatron-core's own torch_dist of DeepSeek-V3 (MLA, a dense first layer, MoE layers with a
shared expert and expert bias, one multi-token prediction layer) against `ckptconv reshard
--to torch_dist`. testdata/hf/deepseek_v3_tiny with num_experts_per_tok 4 and rms_norm_eps 1e-6
(check_mcore_deepseek.py says why), make_mtp.py's MTP layer and e_score_correction_bias in
float32 (the released model's dtype; megatron-core always saves the router's expert_bias in
float32, a bfloat16 one is the one difference then); `ckptconv hf2mcore
--transformer-impl local` at TP 1, TP 2 EP 2 and TP 1 PP 3. For each layout, under torchrun (gloo, CPU;
world size 1; 4 for TP 2 EP 2: DP 2, expert TP 2; 3 for TP 1 PP 3, the MTP layer on the last stage):

- megatron-core 0.16.1's GPTModel (gpt_builder from the checkpoint's args, bf16, the local spec
  with check_mcore_deepseek.py's MLA workarounds) loads hf2mcore's legacy file of its rank
  (load_state_dict strict) and saves model.sharded_state_dict(metadata as Megatron-LM's
  training passes it) with dist_checkpointing.save (torch_dist), args, iteration and
  checkpoint_version in common.pt as Megatron-LM's save_checkpoint puts them;
- `ckptconv reshard <legacy> --to torch_dist` of the same checkpoint; the two DCP checkpoints'
  items compared: the same keys, each tensor the same global shape and dtype, the same chunks
  (offsets and sizes), the same bytes (SHA-256 of the whole tensor); ShardedObject keys equal;
- a fresh GPTModel (each rank its stage) loads ckptconv's torch_dist with
  dist_checkpointing.load(strict=RAISE_ALL: no missing or unexpected key): its state_dict equal
  to that of the model holding the legacy weights, and, where one rank holds the whole model
  (PP 1), its forward logits too (exactly; the main logits, the MTP block runs with labels only);
- ckptconv reads megatron-core's torch_dist: `reshard --to torch` at the source's layout gives
  hf2mcore's rank files with the same tensors (`ckptconv diff`; the files' args are this
  script's Namespace, not hf2mcore's), `mcore2hf` gives the HF tensors back.

By hand, not a ctest (it needs megatron-core):

    PYTHONPATH=/path/to/Megatron-LM:testdata/gen VENV/bin/python \\
        testdata/gen/check_mcore_dist_deepseek.py build/ckptconv > testdata/gen/check_mcore_dist_deepseek.log
"""

import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import check_mcore_deepseek as base

MAKE_MTP = os.path.join(base.TESTDATA, "..", "tests", "cli", "deepseek_v3", "make_mtp.py")
LAYOUTS = [(1, 1, 1), (2, 1, 2), (1, 3, 1)]  # (TP, PP, EP)


def float32_bias(model_dir):
    """e_score_correction_bias widened to float32, as the released DeepSeek-V3 keeps it (and
    Megatron's router saves expert_bias: router.py _save_to_state_dict); the rest as it is."""
    import safetensors.torch
    import torch

    path = os.path.join(model_dir, "model.safetensors")
    tensors = safetensors.torch.load_file(path)
    for k in tensors:
        if k.endswith("e_score_correction_bias"):
            tensors[k] = tensors[k].to(torch.float32)
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})


def build(args, pre=True, post=True):
    """GPTModel from args, the local spec's MLA made to build (check_mcore_deepseek.worker)."""
    from megatron.core.transformer import dot_product_attention as dpa
    from megatron.core.transformer import multi_latent_attention as mla
    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None
    if not getattr(dpa.DotProductAttention.__init__, "mla", False):
        plain_init = dpa.DotProductAttention.__init__

        def mla_init(self, config, *a, k_channels=None, v_channels=None, **kw):
            assert v_channels in (None, config.kv_channels), (v_channels, config.kv_channels)
            plain_init(self, config, *a, **kw)

        mla_init.mla = True
        dpa.DotProductAttention.__init__ = mla_init
    if not isinstance(mla.TELinear, type):
        mla.HAVE_TE = False
    import gpt_builders

    model = gpt_builders.gpt_builder(args, pre_process=pre, post_process=post)
    # as Megatron-LM's get_model wraps it in Float16Module (module.bfloat16()); the router keeps
    # its expert bias in float32 whatever the model's dtype (router.py _save_to_state_dict)
    return model.bfloat16() if args.bf16 else model


def worker(legacy, mine, theirs, logits_json):
    import gen_megatron_cpu as shim

    shim.install()
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    state0 = torch.load(glob.glob(os.path.join(legacy, "iter_0000001", "mp_rank_*", "model_optim_rng.pt"))[0],
                        map_location="cpu", weights_only=False)
    saved = vars(state0["args"])
    tp, pp, ep = (saved[k + "_model_parallel_size"] for k in ("tensor", "pipeline", "expert"))
    from megatron.core import mpu, tensor_parallel

    mpu.initialize_model_parallel(tp, pp, expert_model_parallel_size=ep, expert_tensor_parallel_size=tp)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)
    sys.argv = ["pretrain_gpt.py", "--num-layers", "1", "--hidden-size", "8", "--num-attention-heads", "1",
                "--seq-length", "8", "--max-position-embeddings", "8", "--micro-batch-size", "1",
                "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-swiglu-fusion",
                "--no-bias-gelu-fusion", "--no-rope-fusion", "--no-bias-dropout-fusion", "--no-persist-layer-norm"]
    from megatron.training import global_vars
    from megatron.training.arguments import parse_args

    args = parse_args()
    for k, v in saved.items():
        setattr(args, k, v)
    args.world_size, args.data_parallel_size = dist.get_world_size(), dist.get_world_size() // (tp * pp)
    global_vars.set_args(args)
    t, e, p = (mpu.get_tensor_model_parallel_rank(), mpu.get_expert_model_parallel_rank(),
               mpu.get_pipeline_model_parallel_rank())
    name = "mp_rank_%02d" % t + ("_%03d" % p if pp > 1 else "") + ("_%03d" % e if ep > 1 else "")
    stage = {"pre": mpu.is_pipeline_first_stage(), "post": mpu.is_pipeline_last_stage()}
    state = torch.load(os.path.join(legacy, "iter_0000001", name, "model_optim_rng.pt"), map_location="cpu",
                       weights_only=False)
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    from megatron.core.dist_checkpointing.validation import StrictHandling

    # the writer processes log their memory use through psutil, which this venv lacks (without
    # it they raise and the save waits for them forever); the files do not depend on it
    filesystem_async._process_memory = lambda: 0

    def metadata():
        return {"singleton_local_shards": False, "chained_optim_avoid_prefix": True,
                "dp_cp_group": mpu.get_data_parallel_group(with_context_parallel=True)}

    model = build(args, **stage)
    missing, unexpected = model.load_state_dict(state["model"], strict=True)
    assert not missing and not unexpected, (missing, unexpected)
    out = os.path.join(theirs, "iter_0000001")
    os.makedirs(out, exist_ok=True)
    dist_checkpointing.save({"args": args, "checkpoint_version": 3.0, "iteration": 1,
                             "model": model.sharded_state_dict(metadata=metadata())}, out)
    if dist.get_rank() == 0:
        open(os.path.join(theirs, "latest_checkpointed_iteration.txt"), "w").write("1")

    ref = json.load(open(logits_json))
    ids = torch.tensor([ref["input_ids"]], dtype=torch.long)
    pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0)

    def logits(m):
        """The main logits: without labels GPTModel runs no MTP block (check_mcore_mtp.py runs it)."""
        m.eval()
        m.mtp_process, layers, m.config.mtp_num_layers = False, m.config.mtp_num_layers, None
        try:
            with torch.no_grad():
                return m(input_ids=ids, position_ids=pos, attention_mask=None).float()
        finally:
            m.mtp_process, m.config.mtp_num_layers = True, layers

    fresh = build(args, **stage)
    loaded = dist_checkpointing.load({"model": fresh.sharded_state_dict(metadata=metadata())},
                                     os.path.join(mine, "iter_0000001"), strict=StrictHandling.RAISE_ALL)
    missing, unexpected = fresh.load_state_dict(loaded["model"], strict=True)
    assert not missing and not unexpected, (missing, unexpected)
    # forward where one rank holds the whole model (no pipeline schedule here)
    same = pp == 1 and torch.equal(logits(fresh), logits(model))
    same = all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.state_dict().values())
               if torch.is_tensor(a)) and (same or pp > 1)
    counts = [None] * dist.get_world_size()
    dist.all_gather_object(counts, len([k for k in state["model"] if not k.endswith("_extra_state")]))
    if dist.get_rank() == 0:
        print(json.dumps({"equal": same, "pp": pp, "tensors": sum(counts)}))
    dist.destroy_process_group()


def items(ckpt):
    """{key: (kind, dtype, shape, sorted chunks, sha256)} of a DCP checkpoint, tensors read whole."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    d = os.path.join(ckpt, "iter_0000001")
    reader = dcp.FileSystemReader(d)
    md = reader.read_metadata()
    out, want = {}, {}
    for k, v in md.state_dict_metadata.items():
        if isinstance(v, TensorStorageMetadata):
            want[k] = torch.empty(tuple(v.size), dtype=v.properties.dtype)
            chunks = sorted((tuple(c.offsets), tuple(c.sizes)) for c in v.chunks)
            out[k] = ["tensor", str(v.properties.dtype), list(v.size), chunks]
        else:
            out[k] = ["object"]
    dcp.load(want, storage_reader=reader, no_dist=True)
    for k, t in want.items():
        out[k].append(hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest())
    return out


def compare(mine, theirs):
    a, b = items(mine), items(theirs)
    rows = []
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            rows.append("  %s: only in %s" % (k, "ckptconv's" if k in a else "megatron-core's"))
        elif a[k] != b[k]:
            rows.append("  %s: ckptconv %s, megatron-core %s" % (k, a[k][:4], b[k][:4]))
    tensors = sum(1 for v in b.values() if v[0] == "tensor")
    chunks = sum(len(v[3]) for v in b.values() if v[0] == "tensor")
    return len(b), tensors, chunks, rows


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:6])
        return
    import megatron.core
    import torch

    ckptconv = os.path.abspath(sys.argv[1])
    print("check_mcore_dist_deepseek.py: DeepSeek-V3 + MTP, hf2mcore --transformer-impl local -> megatron-core "
          "dist_checkpointing.save (torch_dist) vs ckptconv reshard --to torch_dist; megatron-core loads ckptconv's "
          "(strict) and ckptconv reads megatron-core's")
    print("torch %s, megatron-core %s, Python %s" % (torch.__version__, megatron.core.__version__,
                                                    sys.version.split()[0]))
    print()
    with tempfile.TemporaryDirectory() as work:
        src = os.path.join(base.TESTDATA, "hf/deepseek_v3_tiny")
        variant = os.path.join(work, "variant")
        base.derive(src, variant, {"num_experts_per_tok": base.TOPK, "rms_norm_eps": 1e-6})
        subprocess.run([sys.executable, MAKE_MTP, variant], check=True)
        float32_bias(variant)
        for tp, pp, ep in LAYOUTS:
            tag = "TP%d PP%d EP%d" % (tp, pp, ep)
            legacy, mine, theirs, back, hf = (os.path.join(work, "%s%d%d%d" % (d, tp, pp, ep))
                                              for d in ("legacy", "mine", "theirs", "back", "hf"))
            base.run(ckptconv, "hf2mcore", variant, legacy, "--tp", str(tp), "--pp", str(pp), "--ep", str(ep),
                     "--transformer-impl", "local")
            base.run(ckptconv, "reshard", legacy, mine, "--to", "torch_dist")
            world = tp * ep * pp
            r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
                                "--master-addr", "127.0.0.1", "--master-port", str(29531 + world),
                                os.path.abspath(__file__), "--worker", legacy, mine, theirs,
                                os.path.join(src, "logits.json")], capture_output=True, text=True)
            if r.returncode != 0:
                print("%s: megatron-core failed: %s" % (tag, "\n".join(x for x in r.stderr.splitlines() if "Error" in x or "error" in x)[-3000:]))
                continue
            out = json.loads([x for x in r.stdout.splitlines() if x.startswith("{")][-1])
            n, tensors, chunks, rows = compare(mine, theirs)
            print("%s (world size %d): %d items (%d tensors in %d chunks): %s" % (
                tag, world, n, tensors, chunks, "keys, dtypes, shapes, chunks and bytes equal" if not rows
                else "%d DIFFER" % len(rows)))
            for x in rows:
                print(x)
            print("%s: megatron-core loads ckptconv's torch_dist (strict; %d tensors over the ranks): %s %s" % (
                tag, out["tensors"], "state_dict" if out["pp"] > 1 else "state_dict and forward logits",
                "equal to the legacy load's" if out["equal"] else "DIFFERENT"))
            base.run(ckptconv, "reshard", theirs, back, "--to", "torch")
            d = subprocess.run([ckptconv, "diff", legacy, back], capture_output=True, text=True)
            print("%s: ckptconv reshard of megatron-core's torch_dist --to torch: %s; vs hf2mcore's: %s" % (
                tag, ", ".join(sorted(os.listdir(os.path.join(back, "iter_0000001")))),
                (d.stdout.strip().splitlines() or ["exit %d" % d.returncode])[-1]))
            base.run(ckptconv, "mcore2hf", theirs, hf)
            d = subprocess.run([ckptconv, "diff", variant, hf], capture_output=True, text=True)
            print("%s: ckptconv mcore2hf of megatron-core's torch_dist vs the HF model: %s" % (
                tag, (d.stdout.strip().splitlines() or ["exit %d" % d.returncode])[-1]))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
