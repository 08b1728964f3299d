"""Megatron-LM runs what hf2mcore writes for the mixture-of-experts families: for each fixture,
`ckptconv hf2mcore --transformer-impl local` (TP 1 PP 1, and TP 2 PP 2 then `ckptconv reshard
--tp 1 --pp 1`), then megatron-core 0.16.1's GPTModel (local spec, SequentialMLP experts,
allgather dispatcher), built from the args in the checkpoint, loads the model state
(load_state_dict strict) and runs forward on logits.json's ids; its logits must equal
transformers' (logits.json) within 1e-4 x the largest logit. By hand, not a ctest (it needs
megatron-core):

    PYTHONPATH=/path/to/Megatron-LM:testdata/gen VENV/bin/python testdata/gen/check_mcore_moe.py \\
        build/ckptconv > testdata/gen/check_mcore_moe.log

VENV: torch + megatron-core 0.16.1 (README_megatron.md); Megatron-LM: a checkout of tag
core_v0.16.1. The model is built as check_mcore_families.py builds it (Megatron's parse_args
defaults, the checkpoint's args over them, gpt_builders.gpt_builder), in float32: the fixtures
are bfloat16 and logits.json is transformers' float32 forward of those bfloat16 weights, so
the args' bf16/params_dtype are set to float32 and the weights load into float32 parameters.
Controls, whose logits must differ: the router's softmax placed the other way
(moe_router_pre_softmax flipped: Qwen3-MoE's norm_topk_prob False is pre-softmax True) and
experts 0 and 1 of layer 0 swapped. The last rows: the 5.24 Qwen3-MoE made to have a dense
layer 0 (mlp_only_layers [0]: its expert 0 as the dense MLP), Megatron's moe_layer_freq [0, 1],
against transformers' forward of it (transformers in the same venv).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
INPUT_TOL = 1e-4

FAMILIES = [
    ("mixtral (transformers 4.53)", "hf/mixtral_tiny"),
    ("mixtral (transformers 5.24)", "hf/transformers5/mixtral_tiny"),
    ("qwen3_moe (transformers 4.53)", "hf/qwen3_moe_tiny"),
    ("qwen3_moe (transformers 5.24)", "hf/transformers5/qwen3_moe_tiny"),
]


def worker(ckpt, logits_json, control):
    import gen_megatron_cpu as shim

    shim.install()
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29518")
    dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import mpu, tensor_parallel

    mpu.initialize_model_parallel(1, 1)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)

    state = torch.load(os.path.join(ckpt, "iter_0000001", "mp_rank_00", "model_optim_rng.pt"),
                       map_location="cpu", weights_only=False)
    theirs = vars(state["args"])
    sys.argv = ["pretrain_gpt.py", "--num-layers", "1", "--hidden-size", "8", "--num-attention-heads", "1",
                "--seq-length", "8", "--max-position-embeddings", "8", "--micro-batch-size", "1",
                "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-swiglu-fusion",
                "--no-bias-gelu-fusion", "--no-rope-fusion", "--no-bias-dropout-fusion", "--no-persist-layer-norm"]
    from megatron.training import global_vars
    from megatron.training.arguments import parse_args

    args = parse_args()
    for k, v in theirs.items():
        setattr(args, k, v)
    args.bf16, args.fp16, args.params_dtype = False, False, torch.float32
    if control == "pre_softmax":
        args.moe_router_pre_softmax = not args.moe_router_pre_softmax
    global_vars.set_args(args)

    # megatron-core 0.16.1's moe_utils imports te_general_gemm from Transformer Engine and
    # leaves the name undefined without it (as gen_megatron_distopt.py shims it)
    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None
    import gpt_builders

    model = gpt_builders.gpt_builder(args, pre_process=True, post_process=True)
    weights = dict(state["model"])
    if control == "swap_experts":
        a = "decoder.layers.0.mlp.experts.local_experts.%d.linear_fc%d.weight"
        for fc in (1, 2):
            weights[a % (0, fc)], weights[a % (1, fc)] = weights[a % (1, fc)], weights[a % (0, fc)]
    missing, unexpected = model.load_state_dict(weights, strict=True)
    assert not missing and not unexpected, (missing, unexpected)

    ref = json.load(open(logits_json))
    ids = torch.tensor([ref["input_ids"]], dtype=torch.long)
    pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids, position_ids=pos, attention_mask=None).float()[0]
    want = torch.tensor(ref["logits"], dtype=torch.float32)
    got = logits[:, :want.shape[1]]
    mlp = model.decoder.layers[-1].mlp
    print(json.dumps({
        "max_abs_diff": float((got - want).abs().max()),
        "largest_logit": float(want.abs().max()),
        "tensors": len([k for k in state["model"] if not k.endswith("_extra_state")]),
        "mlp": "%s/%s" % (type(mlp).__name__, type(mlp.experts).__name__),
        "dispatcher": args.moe_token_dispatcher_type,
        "routing": "topk %d of %d, pre_softmax %s" % (args.moe_router_topk, args.num_experts,
                                                      args.moe_router_pre_softmax),
    }))
    dist.destroy_process_group()


def run(ckptconv, *argv):
    r = subprocess.run([ckptconv, *argv, "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or "exit %d" % r.returncode)


def forward(tp1, src, control="-"):
    r = subprocess.run([sys.executable, __file__, "--worker", tp1, os.path.join(src, "logits.json"), control],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def row(family, how, out):
    ok = out["max_abs_diff"] <= INPUT_TOL * max(out["largest_logit"], 1.0)
    return "%-30s %-24s %-30s %-26s %3d  %-9.3g %s" % (family, how, out["mlp"], out["routing"], out["tensors"],
                                                        out["max_abs_diff"], "equal" if ok else "DIFFERENT")


def check(ckptconv, family, rel, work, controls=True):
    src = os.path.join(TESTDATA, rel)
    direct, mc, tp1 = (os.path.join(work, d) for d in ("direct", "mc", "tp1"))
    for d in (direct, mc, tp1):
        shutil.rmtree(d, ignore_errors=True)
    rows = []
    try:
        run(ckptconv, "hf2mcore", src, direct, "--transformer-impl", "local")
        run(ckptconv, "hf2mcore", src, mc, "--tp", "2", "--pp", "2", "--transformer-impl", "local")
        run(ckptconv, "reshard", mc, tp1, "--tp", "1", "--pp", "1")
    except RuntimeError as e:
        return ["%-30s not run: %s" % (family, str(e))]
    runs = [("hf2mcore TP1 PP1", direct, "-"), ("TP2 PP2, reshard TP1", tp1, "-")]
    if controls:
        runs += [("control: pre_softmax", direct, "pre_softmax"), ("control: swap experts", direct, "swap_experts")]
    for how, ckpt, control in runs:
        out, err = forward(ckpt, src, control)
        rows.append(row(family, how, out) if out else "%-30s %-24s megatron-core: %s" % (family, how, err))
    return rows


def derive_dense(src, dst):
    """The Qwen3-MoE fixture with layer 0 dense (mlp_only_layers [0], intermediate_size 32): its
    expert 0 as the dense MLP, the other experts and the router dropped; logits.json
    transformers' float32 forward of it."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    cfg = json.load(open(os.path.join(dst, "config.json")))
    cfg.update({"mlp_only_layers": [0], "intermediate_size": cfg["moe_intermediate_size"]})
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    weights = load_file(os.path.join(src, "model.safetensors"))
    l0 = "model.layers.0.mlp."
    out = {}
    for k, v in weights.items():
        if k.startswith(l0 + "experts.0."):
            out[l0 + k[len(l0 + "experts.0."):]] = v
        elif not k.startswith(l0):
            out[k] = v
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    ref = json.load(open(os.path.join(src, "logits.json")))
    model = transformers.AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([ref["input_ids"]])).logits[0].float()
    json.dump({"input_ids": ref["input_ids"], "logits": logits.tolist()}, open(os.path.join(dst, "logits.json"), "w"))


def check_dense(ckptconv, family, rel, work):
    dense = os.path.join(work, "dense")
    derive_dense(os.path.join(TESTDATA, rel), dense)
    return check(ckptconv, family, dense, work, controls=False)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    import megatron.core
    import torch

    ckptconv = os.path.abspath(sys.argv[1])
    print("check_mcore_moe.py: hf2mcore --transformer-impl local (TP1 PP1; TP2 PP2 -> reshard TP1 PP1) -> "
          "megatron-core GPTModel (local spec, gpt_builder from the checkpoint's args, float32), "
          "load_state_dict(strict=True), forward on logits.json's 8 ids (CPU)")
    print("torch %s, megatron-core %s, Python %s" % (torch.__version__, megatron.core.__version__,
                                                     sys.version.split()[0]))
    print("equal: max |logits - transformers' logits.json| <= %g x the largest logit; n: tensors "
          "(_extra_state aside)" % INPUT_TOL)
    print()
    with tempfile.TemporaryDirectory() as work:
        for family, rel in FAMILIES:
            for r in check(ckptconv, family, rel, work):
                print(r)
            sys.stdout.flush()
        for r in check_dense(ckptconv, "qwen3_moe 5.24, layer 0 dense", "hf/transformers5/qwen3_moe_tiny", work):
            print(r)


if __name__ == "__main__":
    main()
