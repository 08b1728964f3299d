"""Megatron-LM runs what hf2mcore writes: for each family fixture, `ckptconv hf2mcore --tp 2
--pp 2 --transformer-impl local`, then `ckptconv reshard --tp 1 --pp 1`, then megatron-core
0.16.1's GPTModel (local spec), built from the args in the checkpoint, loads the model state
(load_state_dict strict) and runs forward on logits.json's ids; its logits must equal
transformers' (logits.json) within 1e-4. By hand, not a ctest (it needs megatron-core):

    PYTHONPATH=/path/to/Megatron-LM:testdata/gen MCORE_PYTHON=VENV/bin/python \\
        VENV/bin/python testdata/gen/check_mcore_families.py build/ckptconv [FAMILY...] \\
        > testdata/gen/check_mcore_families.log

VENV: torch 2.10.0 + megatron-core 0.16.1 (README_megatron.md); Megatron-LM: a checkout of tag
core_v0.16.1 (megatron/training and gpt_builders.py on top of the wheel's megatron/core). The
model is built the way pretrain_gpt.py builds it: Megatron's parse_args defaults, every arg the
checkpoint holds set over them, then gpt_builders.gpt_builder (core_transformer_config_from_args,
get_gpt_layer_local_spec). Each checkpoint runs in its own process (gloo, world size 1, the CPU
shims of gen_megatron_cpu.py).

core_v0.16.1's gpt_builder passes use_rope_scaling to GPTModel but not rope_scaling_factor,
so the model takes GPTModel's default factor 8 whatever --rope-scaling-factor says. Each
model with use_rope_scaling therefore runs twice: as gpt_builder builds it, and with
args.rope_scaling_factor passed through. A model with a sliding window runs once more without
it, and one with q/k layernorms without them, as controls: those logits must differ. A family that cannot run has its reason in the log
instead.
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

# family -> fixture directory under testdata/ (None: the reason it is not run)
FAMILIES = [
    ("llama3", "hf/llama3_tiny"),
    ("llama3 (transformers 5)", "hf/transformers5/llama3_tiny"),
    ("mistral", "hf/mistral_tiny"),
    ("qwen2", "hf/qwen2_tiny"),
    ("llama32", "hf/llama32_tiny"),
    ("qwen3", "hf/transformers5/qwen3_tiny"),
    ("gpt2", "hf/gpt2_tiny"),
    ("gemma3", "hf/transformers5/gemma3_tiny"),
]
NOT_RUN = {
    "gemma3": "megatron-core 0.16.1's local spec has no post-attention/post-MLP norms, its torch norm "
              "asserts on zero-centred gamma (layernorm_zero_centered_gamma), and GPTModel has no "
              "embedding scale and one RoPE base; hf2mcore refuses --transformer-impl local for Gemma 3",
}


def worker(ckpt, logits_json, factor_from_args, control):
    """Runs in its own process: build GPTModel from ckpt's args, load, forward; prints JSON."""
    import gen_megatron_cpu as shim

    shim.install()
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import mpu, tensor_parallel

    mpu.initialize_model_parallel(1, 1)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)

    state = torch.load(os.path.join(ckpt, "iter_0000001", "mp_rank_00", "model_optim_rng.pt"),
                       map_location="cpu", weights_only=False)
    theirs = vars(state["args"])
    sys.argv = ["pretrain_gpt.py", "--num-layers", "1", "--hidden-size", "8", "--num-attention-heads", "1",
                "--seq-length", "8", "--max-position-embeddings", "8", "--micro-batch-size", "1",
                # CPU: no fused kernels (TE/apex); these choose kernels, not the math
                "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-swiglu-fusion",
                "--no-bias-gelu-fusion", "--no-rope-fusion", "--no-bias-dropout-fusion", "--no-persist-layer-norm"]
    from megatron.training import global_vars
    from megatron.training.arguments import parse_args

    args = parse_args()
    for k, v in theirs.items():
        setattr(args, k, v)
    if control == "no_window":
        args.window_size = None
    elif control == "no_qk_layernorm":
        args.qk_layernorm = False
    global_vars.set_args(args)

    import gpt_builders

    if factor_from_args:
        real = gpt_builders.GPTModel

        def with_factor(*a, **k):
            k["rope_scaling_factor"] = args.rope_scaling_factor
            return real(*a, **k)

        gpt_builders.GPTModel = with_factor
    model = gpt_builders.gpt_builder(args, pre_process=True, post_process=True)
    weights = state["model"]
    if control == "no_qk_layernorm":
        weights = {k: v for k, v in weights.items() if "q_layernorm" not in k and "k_layernorm" not in k}
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
    rope = ("factor %g" % getattr(args, "rope_scaling_factor", 0)) if getattr(args, "use_rope_scaling", False) else "-"
    print(json.dumps({
        "max_abs_diff": float((got - want).abs().max()),
        "largest_logit": float(want.abs().max()),
        "padded_vocab": int(logits.shape[1]),
        "tensors": len([k for k in state["model"] if not k.endswith("_extra_state")]),
        "attention": type(model.decoder.layers[0].self_attention.core_attention).__name__,
        "qk_layernorm": bool(args.qk_layernorm),
        "window_size": list(args.window_size) if args.window_size else None,
        "rope": rope,
    }))
    dist.destroy_process_group()


def run(ckptconv, *argv):
    r = subprocess.run([ckptconv, *argv, "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or "exit %d" % r.returncode)


def shown(text):
    return text.replace(TESTDATA + os.sep, "testdata" + os.sep)


def forward(tp1, src, factor_from_args=False, control="-"):
    """The worker's JSON, or the last line of its error."""
    r = subprocess.run([sys.executable, __file__, "--worker", tp1, os.path.join(src, "logits.json"),
                        "1" if factor_from_args else "0", control], capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def row(family, how, out):
    ok = out["max_abs_diff"] <= INPUT_TOL * max(out["largest_logit"], 1.0)
    window = "%d,%d" % tuple(out["window_size"]) if out["window_size"] else "-"
    return "%-24s %-22s %-10s %-5s %-6s %3d  %-9.3g %s" % (
        family, how, out["rope"], "yes" if out["qk_layernorm"] else "no", window, out["tensors"],
        out["max_abs_diff"], "equal" if ok else "DIFFERENT")


def check(ckptconv, family, rel, work):
    src = os.path.join(TESTDATA, rel)
    mc, tp1 = os.path.join(work, "mc"), os.path.join(work, "tp1")
    shutil.rmtree(mc, ignore_errors=True)
    shutil.rmtree(tp1, ignore_errors=True)
    try:
        run(ckptconv, "hf2mcore", src, mc, "--tp", "2", "--pp", "2", "--transformer-impl", "local")
        run(ckptconv, "reshard", mc, tp1, "--tp", "1", "--pp", "1")
    except RuntimeError as e:
        return ["%-24s not run: %s" % (family, shown(str(e)))]
    base, err = forward(tp1, src)
    if err:
        return ["%-24s not run: megatron-core: %s" % (family, shown(err))]
    rows = [row(family, "gpt_builder", base)]
    # factor: the llama3 factor the args give; controls (the model without its window or its
    # q/k norms) must not give transformers' logits
    runs = [("factor from args", dict(factor_from_args=True), base["rope"] != "-"),
            ("control: no window", dict(control="no_window"), bool(base["window_size"])),
            ("control: no q/k norms", dict(control="no_qk_layernorm"), base["qk_layernorm"])]
    for how, kw, wanted in runs:
        if wanted:
            out, err = forward(tp1, src, **kw)
            rows.append(row(family, how, out) if out else "%-24s %-22s megatron-core: %s" % (family, how, shown(err)))
    return rows


def versions():
    import megatron.core
    import torch

    return "torch %s, megatron-core %s, Python %s" % (torch.__version__, megatron.core.__version__,
                                                     sys.version.split()[0])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5])
        return
    ckptconv = os.path.abspath(sys.argv[1])
    wanted = sys.argv[2:]
    print("check_mcore_families.py: hf2mcore --tp 2 --pp 2 --transformer-impl local -> reshard --tp 1 "
          "--pp 1 -> megatron-core GPTModel (local spec: DotProductAttention, built by "
          "gpt_builders.gpt_builder from the checkpoint's args), load_state_dict(strict=True), forward on "
          "logits.json's 8 ids (CPU, fp32)")
    print(versions())
    print("equal: max |logits - transformers' logits.json| <= %g x the largest logit; n: tensors in the checkpoint "
          "(_extra_state aside)" % INPUT_TOL)
    print()
    print("%-24s %-22s %-10s %-5s %-6s %3s  %-9s %s" % ("family", "built by", "args rope", "qk-ln", "window", "n",
                                                     "max|diff|", ""))
    with tempfile.TemporaryDirectory() as work:
        for family, rel in FAMILIES:
            if wanted and family.split()[0] not in wanted:
                continue
            if family in NOT_RUN:
                print("%-24s not run: %s" % (family, NOT_RUN[family]))
                continue
            for row in check(ckptconv, family, rel, work):
                print(row)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
