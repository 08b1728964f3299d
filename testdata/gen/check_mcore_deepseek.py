"""Megatron-LM runs what hf2mcore writes for DeepSeek-V3: multi-latent attention with YaRN RoPE,
a dense first layer, MoE layers with a sigmoid router, expert bias, group-limited top-k and a
shared expert. For each fixture (testdata/hf/deepseek_v3_tiny, transformers 4.53.3, and
transformers5/deepseek_v3_tiny, 5.24.0): `ckptconv hf2mcore --transformer-impl local` (TP 1 PP 1,
and TP 2 EP 2 then `ckptconv reshard --tp 1 --ep 1`), then megatron-core 0.16.1's GPTModel
(local spec with multi_latent_attention, SequentialMLP experts, allgather dispatcher), built
from the args in the checkpoint, loads the model state (load_state_dict strict) and runs
forward on logits.json's ids on the CPU (gloo); its logits must equal transformers' within
1e-6 x the largest logit (at least 1). By hand, not a ctest (it needs megatron-core and transformers):

    PYTHONPATH=/path/to/Megatron-LM:testdata/gen VENV/bin/python testdata/gen/check_mcore_deepseek.py \\
        build/ckptconv > testdata/gen/check_mcore_deepseek.log

VENV: torch, megatron-core 0.16.1 and transformers (5.23 here, for the reference forward of
the derived model below); Megatron-LM: a checkout of tag core_v0.16.1.

The fixtures as they are are no model Megatron can compute, and hf2mcore refuses them: they route
top-2 of 8 experts in 4 groups with topk_group 2, where transformers scores a group by the sum of
its top 2 expert scores and megatron-core's group_limited_topk by the sum of its top
moe_router_topk / moe_router_group_topk = 1 (group_routing_same); and they have rms_norm_eps
1e-5, where transformers normalises MLA's compressed q and kv with DeepseekV3RMSNorm's own eps
1e-6 and Megatron with layernorm_epsilon (norm_epsilon) like every other norm. The conversions
are of the fixture with num_experts_per_tok 4 (= 2 x topk_group: both sides score groups by
their top 2, as in DeepSeek-V3's own 8 of 256 in 4 of 8 groups) and rms_norm_eps 1e-6, the same
weights; the reference is transformers' float32 forward of that (the first row shows that
forward reproduces logits.json for the fixture itself). The rows "top 2" and "eps 1e-5" build
Megatron from that conversion with the fixture's moe_router_topk 2 or norm_epsilon 1e-5 and
compare with transformers' forward of the fixture with only that change: what the refusals
prevent.

megatron-core 0.16.1's local spec cannot build MLA as it is: MLASelfAttention passes k_channels
and v_channels to the local DotProductAttention, whose __init__ has no such arguments (TypeError);
the worker drops them (v_channels checked against kv_channels, the output's head size), see
mla_init. Without Transformer Engine, multi_latent_attention.py's HAVE_TE is still True (the
extension module imports with MagicMock classes) and isinstance(..., TELinear) raises TypeError;
the worker sets HAVE_TE False.

The rows "q_lora_rank null" are of that derived model without query compression, as
DeepSeek-V2-Lite has it: tests/cli/deepseek_v3/make_q_proj.py replaces each layer's q_a_proj,
q_a_layernorm and q_b_proj with one q_proj (Megatron's linear_q_proj).

The model is built in float32 (the weights are bfloat16, logits.json is transformers' float32
forward of them). Controls, whose logits must differ: the expert bias of both MoE layers zeroed,
and experts 0 and 1 of layer 1 swapped.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
INPUT_TOL = 1e-6
TOPK = 4
MAKE_Q_PROJ = os.path.join(os.path.dirname(TESTDATA), "tests", "cli", "deepseek_v3", "make_q_proj.py")

FIXTURES = [
    ("deepseek_v3 (transformers 4.53)", "hf/deepseek_v3_tiny"),
    ("deepseek_v3 (transformers 5.24)", "hf/transformers5/deepseek_v3_tiny"),
]


def reference(src, logits_json, out_json):
    """transformers' float32 logits of the model in src on logits.json's ids, into out_json."""
    import torch
    import transformers

    ref = json.load(open(logits_json))
    model = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([ref["input_ids"]])).logits[0].float()
    json.dump({"input_ids": ref["input_ids"], "logits": logits.tolist(),
               "transformers": transformers.__version__}, open(out_json, "w"))


def worker(ckpt, logits_json, control):
    import gen_megatron_cpu as shim

    shim.install()
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29519")
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
    if control == "topk2":
        args.moe_router_topk = 2
    if control == "eps":
        args.norm_epsilon = args.layernorm_epsilon = 1e-5
    global_vars.set_args(args)

    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None
    # megatron-core 0.16.1's MLASelfAttention passes k_channels and v_channels to its core
    # attention, which only TEDotProductAttention takes; the local DotProductAttention refuses
    # them (TypeError). It computes with whatever head size q and k have and lays the output out
    # as kv_channels per head, which hf2mcore writes as v_head_dim: dropping the two arguments
    # (v_channels checked) runs the local spec's MLA as the Transformer Engine one would.
    from megatron.core.transformer import dot_product_attention as dpa

    plain_init = dpa.DotProductAttention.__init__

    def mla_init(self, config, *a, k_channels=None, v_channels=None, **kw):
        assert v_channels in (None, config.kv_channels), (v_channels, config.kv_channels)
        plain_init(self, config, *a, **kw)

    dpa.DotProductAttention.__init__ = mla_init
    # Without Transformer Engine, megatron.core.extensions.transformer_engine still imports
    # (its classes MagicMock stand-ins), so multi_latent_attention's HAVE_TE is True and
    # isinstance(self.linear_proj, TELinear) raises TypeError: say there is no TE.
    from megatron.core.transformer import multi_latent_attention as mla

    if not isinstance(mla.TELinear, type):
        mla.HAVE_TE = False
    import gpt_builders

    model = gpt_builders.gpt_builder(args, pre_process=True, post_process=True)
    weights = dict(state["model"])
    if control == "zero_bias":
        for k in weights:
            if k.endswith("mlp.router.expert_bias"):
                weights[k] = torch.zeros_like(weights[k])
    if control == "swap_experts":
        a = "decoder.layers.1.mlp.experts.local_experts.%d.linear_fc%d.weight"
        for fc in (1, 2):
            weights[a % (0, fc)], weights[a % (1, fc)] = weights[a % (1, fc)], weights[a % (0, fc)]
    missing, unexpected = model.load_state_dict(weights, strict=True)
    assert not missing and not unexpected, (missing, unexpected)
    order = [k for k in model.state_dict() if k in state["model"]]

    ref = json.load(open(logits_json))
    ids = torch.tensor([ref["input_ids"]], dtype=torch.long)
    pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids, position_ids=pos, attention_mask=None).float()[0]
    want = torch.tensor(ref["logits"], dtype=torch.float32)
    got = logits[:, :want.shape[1]]
    layers = model.decoder.layers
    print(json.dumps({
        "max_abs_diff": float((got - want).abs().max()),
        "largest_logit": float(want.abs().max()),
        "tensors": len([k for k in state["model"] if not k.endswith("_extra_state")]),
        "keys_in_order": order == list(state["model"]),
        "modules": "%s, %s/%s" % (type(layers[0].self_attention).__name__, type(layers[0].mlp).__name__,
                                  type(layers[1].mlp).__name__),
        "routing": "%s topk %d/%d, groups %s/%s, scale %s" % (
            args.moe_router_score_function, args.moe_router_topk, args.num_experts, args.moe_router_group_topk,
            args.moe_router_num_groups, args.moe_router_topk_scaling_factor),
    }))
    dist.destroy_process_group()


def run(ckptconv, *argv):
    r = subprocess.run([ckptconv, *argv, "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or "exit %d" % r.returncode)


def forward(ckpt, logits_json, control="-"):
    r = subprocess.run([sys.executable, __file__, "--worker", ckpt, logits_json, control],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def compare(a_json, b_json):
    a, b = (json.load(open(p))["logits"] for p in (a_json, b_json))
    diff = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
    return diff, max(abs(x) for r in b for x in r)


def verdict(diff, largest):
    return "equal" if diff <= INPUT_TOL * max(largest, 1.0) else "DIFFERENT"


def row(family, how, out):
    return "%-32s %-26s %-42s %-44s %3d %-5s %-9.3g %s" % (
        family, how, out["modules"], out["routing"], out["tensors"], "yes" if out["keys_in_order"] else "NO",
        out["max_abs_diff"], verdict(out["max_abs_diff"], out["largest_logit"]))


def derive(src, dst, changes):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    cfg = json.load(open(os.path.join(dst, "config.json")))
    cfg.update(changes)
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)


def convert(ckptconv, src, tp1, tp2_ep2, back_to_tp1):
    """hf2mcore of src (local names) at TP1 PP1 and at TP2 EP2, and the latter resharded to TP1"""
    run(ckptconv, "hf2mcore", src, tp1, "--transformer-impl", "local")
    run(ckptconv, "hf2mcore", src, tp2_ep2, "--tp", "2", "--ep", "2", "--transformer-impl", "local")
    run(ckptconv, "reshard", tp2_ep2, back_to_tp1, "--tp", "1", "--pp", "1", "--ep", "1")


def check(ckptconv, family, rel, work):
    src = os.path.join(TESTDATA, rel)
    fixture_logits = os.path.join(src, "logits.json")
    direct, mc, tp1 = (os.path.join(work, d) for d in ("direct", "mc", "tp1"))
    for d in (direct, mc, tp1):
        shutil.rmtree(d, ignore_errors=True)
    rows = []
    try:
        run(ckptconv, "hf2mcore", src, direct, "--transformer-impl", "local")
    except RuntimeError as e:
        rows.append("%-32s %-26s hf2mcore refuses: %s" % (family, "fixture as it is",
                                                          str(e).split("config.json: ")[-1][:110] + "..."))
    check_logits = os.path.join(work, "check.json")
    reference(src, fixture_logits, check_logits)
    diff, largest = compare(check_logits, fixture_logits)
    rows.append("%-32s %-26s transformers %s forward vs logits.json: %.3g %s" % (
        family, "reference", json.load(open(check_logits))["transformers"], diff, verdict(diff, largest)))
    refs = {}
    for name, changes in (("variant", {"num_experts_per_tok": TOPK, "rms_norm_eps": 1e-6}),
                          ("topk2", {"rms_norm_eps": 1e-6}), ("eps", {"num_experts_per_tok": TOPK})):
        derive(src, os.path.join(work, name), changes)
        refs[name] = os.path.join(work, name + ".json")
        reference(os.path.join(work, name), fixture_logits, refs[name])
    variant = os.path.join(work, "variant")
    try:
        convert(ckptconv, variant, direct, mc, tp1)
    except RuntimeError as e:
        return rows + ["%-32s not run: %s" % (family, str(e))]
    # DeepSeek-V2-Lite's attention: no query compression (q_lora_rank null, one q_proj)
    qproj, qmc, qtp2, qtp1 = (os.path.join(work, d) for d in ("q_proj", "qmc", "qtp2", "qtp1"))
    derive(variant, qproj, {"q_lora_rank": None})
    subprocess.run([sys.executable, MAKE_Q_PROJ, qproj], check=True)
    refs["q_proj"] = os.path.join(work, "q_proj.json")
    reference(qproj, fixture_logits, refs["q_proj"])
    for d in (qmc, qtp2, qtp1):
        shutil.rmtree(d, ignore_errors=True)
    try:
        convert(ckptconv, qproj, qmc, qtp2, qtp1)
    except RuntimeError as e:
        return rows + ["%-32s q_lora_rank null not run: %s" % (family, str(e))]
    for how, ckpt, control, ref in (
            ("hf2mcore TP1 PP1", direct, "-", "variant"),
            ("q_lora_rank null TP1", qmc, "-", "q_proj"),
            ("q_lora null TP2 EP2 -> TP1", qtp1, "-", "q_proj"),
            ("TP2 EP2 -> reshard TP1", tp1, "-", "variant"),
            ("refused: top 2", direct, "topk2", "topk2"),
            ("refused: eps 1e-5", direct, "eps", "eps"),
            ("control: zero expert bias", direct, "zero_bias", "variant"),
            ("control: swap experts", direct, "swap_experts", "variant")):
        out, err = forward(ckpt, refs[ref], control)
        rows.append(row(family, how, out) if out else "%-32s %-26s megatron-core: %s" % (family, how, err))
    return rows


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    import megatron.core
    import torch
    import transformers

    ckptconv = os.path.abspath(sys.argv[1])
    print("check_mcore_deepseek.py: hf2mcore --transformer-impl local (TP1 PP1; TP2 EP2 -> reshard TP1 EP1) -> "
          "megatron-core GPTModel (local spec, multi_latent_attention, gpt_builder from the checkpoint's args, "
          "float32), load_state_dict(strict=True), forward on logits.json's 8 ids (CPU, gloo)")
    print("torch %s, megatron-core %s, transformers %s, Python %s" % (
        torch.__version__, megatron.core.__version__, transformers.__version__, sys.version.split()[0]))
    print("equal: max |logits - reference| <= %g x the largest logit; reference: transformers' forward of the "
          "same weights with num_experts_per_tok %d and rms_norm_eps 1e-6 (for the refused rows: with only the "
          "one change); n: tensors (_extra_state aside); order: the file's keys in the model's state_dict "
          "order" % (INPUT_TOL, TOPK))
    print()
    print("%-32s %-26s %-42s %-44s %3s %-5s %-9s" % ("fixture", "what", "modules (layer 0, MLP 0/1)", "routing",
                                                     "n", "order", "max diff"))
    with tempfile.TemporaryDirectory() as work:
        for family, rel in FIXTURES:
            for r in check(ckptconv, family, rel, work):
                print(r)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
