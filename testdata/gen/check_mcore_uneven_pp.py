"""megatron-core 0.16.1 builds, saves and loads Megatron checkpoints whose pipeline stages hold
unequal numbers of layers as ckptconv reads and writes them. The reference: testdata/hf/llama_tiny
cut to 3 layers (config num_hidden_layers 3, layer 3's tensors dropped), `ckptconv hf2mcore
--transformer-impl local` at TP 1 PP 1. For each split (3 layers over PP 2):

  first1  --decoder-first-pipeline-num-layers 1   (stages of 1 and 2 layers)
  last1   --decoder-last-pipeline-num-layers 1    (2 and 1)
  embed   --account-for-embedding-in-pipeline-split (1 and 2: the embedding counts as a layer)

ckptconv writes the reference at that split, legacy (`reshard --pp 2 <flag>`) and torch_dist
(`reshard --pp 2 <flag> --to torch_dist`). Under torchrun (2 processes, gloo on 127.0.0.1, PP 2,
the CPU shims of gen_megatron_cpu.py) each rank takes the args of OUR legacy file of its stage,
builds megatron-core's GPTModel of its stage from them (gpt_builders.gpt_builder, local spec:
core_transformer_config_from_args maps decoder_first/last_pipeline_num_layers and the
account_for flags onto TransformerConfig), and
  - loads megatron-core's own torch_dist save of the reference (made at PP 1 by a one-process
    worker, which loads the reference file strictly) into its stage: megatron-core's own
    resharding to the uneven stages, the expected state;
  - loads our legacy file of its stage with load_state_dict(strict=True): the same keys in the
    same order as the model's state_dict, every tensor equal to the expected one;
  - loads our torch_dist checkpoint with dist_checkpointing.load (strict return_all: every item
    of the model's sharded_state_dict must be there; items the stage does not ask for are
    listed): every tensor equal to the expected one;
  - saves the stage as megatron-core does: its legacy file (args, iteration, checkpoint_version
    and the model's state_dict_for_save_checkpoint) and dist_checkpointing.save of its
    sharded_state_dict (common.pt holding args).
Then ckptconv reads megatron-core's two saves back at PP 1 (`reshard --pp 1 --no-optimizer`): the
same model keys, in the reference's order, every tensor equal (its args are megatron-core's full
Namespace), and so must ours read back at PP 1 (byte-identical round trips:
tests/cli/reshard/uneven_pp*.sh). By hand, not a
ctest (it needs megatron-core and torchrun):

    PYTHONPATH=/path/to/Megatron-LM:testdata/gen VENV/bin/python testdata/gen/check_mcore_uneven_pp.py \\
        build/ckptconv > testdata/gen/check_mcore_uneven_pp.log
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
ITER = "iter_0000001"
SPLITS = [
    ("first1", ["--decoder-first-pipeline-num-layers", "1"]),
    ("last1", ["--decoder-last-pipeline-num-layers", "1"]),
    ("embed", ["--account-for-embedding-in-pipeline-split"]),
]


def run(*argv):
    r = subprocess.run([*argv], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv[:2]), r.stderr.strip()[-3000:] or "exit %d" % r.returncode))
    return r.stdout + r.stderr


def setup(world, rank):
    import gen_megatron_cpu as shim

    shim.install()
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29534")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from megatron.core import mpu, tensor_parallel

    mpu.initialize_model_parallel(1, world)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)
    from megatron.core.dist_checkpointing.strategies import filesystem_async

    # the writer processes log their memory use through psutil, which this venv lacks (without
    # it they raise and the save waits for them forever); the files do not depend on it
    filesystem_async._process_memory = lambda: 0
    return torch


def sharded(model):
    """The model's sharded state dict as Megatron's training loop asks for it."""
    from megatron.core import mpu

    return model.sharded_state_dict(metadata={
        "singleton_local_shards": False, "chained_optim_avoid_prefix": True,
        "dp_cp_group": mpu.get_data_parallel_group(with_context_parallel=True)})


def build(torch, theirs):
    """GPTModel of this rank's stage from a checkpoint's args, as pretrain_gpt builds it."""
    from megatron.core import mpu

    sys.argv = ["pretrain_gpt.py", "--num-layers", "1", "--hidden-size", "8", "--num-attention-heads", "1",
                "--seq-length", "8", "--max-position-embeddings", "8", "--micro-batch-size", "1",
                "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-swiglu-fusion",
                "--no-bias-gelu-fusion", "--no-rope-fusion", "--no-bias-dropout-fusion", "--no-persist-layer-norm"]
    from megatron.training import global_vars
    from megatron.training.arguments import parse_args

    args = parse_args()
    for k, v in vars(theirs).items():
        setattr(args, k, v)
    args.bf16, args.fp16, args.params_dtype = False, False, torch.float32
    global_vars.set_args(args)
    import gpt_builders

    model = gpt_builders.gpt_builder(args, pre_process=mpu.is_pipeline_first_stage(),
                                     post_process=mpu.is_pipeline_last_stage())
    return args, model


def tensors(sd):
    import torch

    return {k: v for k, v in sd.items() if isinstance(v, torch.Tensor) and not k.endswith("_extra_state")}


def worker_ref(ref, out):
    """PP 1: load the reference strictly, save it with dist_checkpointing."""
    torch = setup(1, 0)
    from megatron.core import dist_checkpointing

    state = torch.load(os.path.join(ref, ITER, "mp_rank_00", "model_optim_rng.pt"), map_location="cpu",
                       weights_only=False)
    _, model = build(torch, state["args"])
    missing, unexpected = model.load_state_dict(state["model"], strict=True)
    assert not missing and not unexpected, (missing, unexpected)
    os.makedirs(out)
    dist_checkpointing.save({"model": sharded(model)}, out)


def worker_split(ours, ours_dist, ref_dist, mcore, report):
    rank = int(os.environ["RANK"])
    torch = setup(2, rank)
    import torch.distributed as dist
    from megatron.core import dist_checkpointing, mpu

    name = "mp_rank_00_%03d" % rank
    state = torch.load(os.path.join(ours, ITER, name, "model_optim_rng.pt"), map_location="cpu", weights_only=False)
    args, model = build(torch, state["args"])
    cfg = model.config
    lines = ["stage %d: %d layers (TransformerConfig num_layers_in_first_pipeline_stage %s, "
             "num_layers_in_last_pipeline_stage %s, account_for_embedding %s, account_for_loss %s)" % (
                 rank, len(model.decoder.layers), cfg.num_layers_in_first_pipeline_stage,
                 cfg.num_layers_in_last_pipeline_stage, cfg.account_for_embedding_in_pipeline_split,
                 cfg.account_for_loss_in_pipeline_split)]
    # expected: megatron-core's own load of its PP 1 save into this stage
    dist_checkpointing.load({"model": sharded(model)}, ref_dist, strict="raise_all")
    want = {k: v.clone() for k, v in tensors(model.state_dict()).items()}
    lines.append("stage %d: megatron-core's torch_dist load of the reference: layers %s" % (
        rank, sorted({k.split(".")[2] for k in want if k.startswith("decoder.layers.")})))
    # ours, legacy: strict, same order, same values
    missing, unexpected = model.load_state_dict(state["model"], strict=True)
    assert not missing and not unexpected, (missing, unexpected)
    order = [k for k in model.state_dict() if k in state["model"]]
    assert order == list(state["model"].keys()), (order, list(state["model"].keys()))
    got = tensors(model.state_dict())
    assert got.keys() == want.keys(), (got.keys(), want.keys())
    bad = [k for k in want if not torch.equal(got[k], want[k])]
    assert not bad, bad
    lines.append("stage %d: our legacy %s loads strictly, in the model's key order, %d tensors equal" % (
        rank, name, len(want)))
    # ours, torch_dist
    for v in model.state_dict().values():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            v.data.zero_()
    _, extra, unexpected = dist_checkpointing.load({"model": sharded(model)}, ours_dist, strict="return_all")
    assert not unexpected, unexpected
    got = tensors(model.state_dict())
    bad = [k for k in want if not torch.equal(got[k], want[k])]
    assert not bad, bad
    lines.append("stage %d: our torch_dist holds every item of the stage's sharded_state_dict, %d tensors equal%s" % (
        rank, len(want), "; items it does not ask for: %s" % sorted(extra) if extra else ""))
    # megatron-core's saves of the stage
    legacy = os.path.join(mcore, "legacy", ITER, name)
    os.makedirs(legacy, exist_ok=True)
    torch.save({"args": args, "checkpoint_version": 3.0, "iteration": 1,
                "model": model.state_dict_for_save_checkpoint()}, os.path.join(legacy, "model_optim_rng.pt"))
    dist_dir = os.path.join(mcore, "dist", ITER)
    if rank == 0:
        os.makedirs(dist_dir, exist_ok=True)
    dist.barrier()
    dist_checkpointing.save({"args": args, "checkpoint_version": 3.0, "iteration": 1, "model": sharded(model)},
                            dist_dir)
    if rank == 0:
        for d in ("legacy", "dist"):
            with open(os.path.join(mcore, d, "latest_checkpointed_iteration.txt"), "w") as f:
                f.write("1")
    with open(report + ".%d" % rank, "w") as f:
        f.write("\n".join(lines) + "\n")
    assert mpu.get_pipeline_model_parallel_world_size() == 2


def same_model(a, b):
    import torch

    x, y = (torch.load(os.path.join(d, ITER, "mp_rank_00", "model_optim_rng.pt"), map_location="cpu",
                       weights_only=False)["model"] for d in (a, b))
    return list(x) == list(y) and all(torch.equal(x[k], y[k]) for k in x if isinstance(x[k], torch.Tensor))


def main():
    if sys.argv[1] == "--ref":
        worker_ref(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1] == "--split":
        worker_split(*sys.argv[2:7])
        return
    import megatron.core
    import torch

    ckptconv = os.path.abspath(sys.argv[1])
    print("check_mcore_uneven_pp.py: llama_tiny cut to 3 layers, hf2mcore TP1 PP1 local; ckptconv's uneven PP 2 "
          "(legacy, torch_dist) -> megatron-core 0.16.1 GPTModel per stage (torchrun, 2 processes, gloo, CPU)")
    print("torch %s, megatron-core %s, Python %s" % (torch.__version__, megatron.core.__version__,
                                                      sys.version.split()[0]))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    with tempfile.TemporaryDirectory() as work:
        src = os.path.join(TESTDATA, "hf", "llama_tiny")
        hf = os.path.join(work, "hf3")
        os.makedirs(hf)
        for n in os.listdir(src):
            if n != "config.json":
                os.symlink(os.path.join(src, n), os.path.join(hf, n))
        config = json.load(open(os.path.join(src, "config.json")))
        config["num_hidden_layers"] = 3
        json.dump(config, open(os.path.join(hf, "config.json"), "w"))
        ref = os.path.join(work, "ref")
        run(ckptconv, "hf2mcore", hf, ref, "--transformer-impl", "local", "--drop", "model.layers.3.*", "-q")
        ref_dist = os.path.join(work, "ref_dist")
        run(sys.executable, __file__, "--ref", ref, ref_dist)
        print("reference: hf2mcore TP1 PP1; megatron-core loads it strictly and saves it (torch_dist, PP 1)")
        for label, flags in SPLITS:
            print()
            print("%s: ckptconv reshard --pp 2 %s" % (label, " ".join(flags)))
            d = os.path.join(work, label)
            ours, ours_dist, mcore = (os.path.join(d, n) for n in ("ours", "ours_dist", "mcore"))
            run(ckptconv, "reshard", ref, ours, "--pp", "2", *flags, "-q")
            run(ckptconv, "reshard", ref, ours_dist, "--pp", "2", *flags, "--to", "torch_dist", "--no-optimizer", "-q")
            report = os.path.join(d, "report")
            r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                                "--master_addr", "127.0.0.1", "--master_port", "29533", __file__, "--split", ours,
                                os.path.join(ours_dist, ITER), ref_dist, mcore, report],
                               capture_output=True, text=True, env=env)
            if r.returncode != 0:
                print("  FAILED: megatron-core worker exit %d\n%s" % (r.returncode, r.stderr[-4000:]))
                sys.exit(1)
            for rank in (0, 1):
                sys.stdout.write("".join("  " + line for line in open(report + ".%d" % rank)))
            back = os.path.join(d, "back_ours")
            run(ckptconv, "reshard", ours, back, "--pp", "1", "-q")
            ok = same_model(ref, back)
            print("  ours -> ckptconv reshard --pp 1: %s" % ("the reference's model" if ok else "DIFFERS"))
            for kind in ("legacy", "dist"):
                back = os.path.join(d, "back_" + kind)
                run(ckptconv, "reshard", os.path.join(mcore, kind), back, "--pp", "1", "--no-optimizer", "-q")
                ok = ok and same_model(ref, back)
                print("  megatron-core's %s save of the stages -> ckptconv reshard --pp 1: %s" % (
                    "torch_dist" if kind == "dist" else kind,
                    "the reference's model" if same_model(ref, back) else "DIFFERS from the reference"))
            if not ok:
                sys.exit(1)
        # the split megatron-core refuses is refused by ckptconv before anything is written
        print()
        r = subprocess.run([ckptconv, "reshard", ref, os.path.join(work, "x"), "--pp", "2", "-q"],
                           capture_output=True, text=True)
        print("even PP 2 of 3 layers: exit %d: %s" % (r.returncode, r.stderr.strip().replace(work, "WORK")))


if __name__ == "__main__":
    main()
