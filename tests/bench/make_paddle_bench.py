"""Writes a LLaMA-shaped PaddleNLP bf16 checkpoint with AdamW state at PP4 (TP1), the input of
the PaddleNLP reshard benchmark (tests/bench/paddle_reshard.sh).

Run with the venv Python (paddlepaddle + numpy):

    .venv/bin/python tests/bench/make_paddle_bench.py [OUT_DIR] [--layers N] [--hidden H] ...

OUT_DIR (default $TMPDIR/ckptconv-bench/paddle_pp4, /tmp when TMPDIR is unset) gets what a
PaddleNLP pipeline-parallel bf16 run (AMP O2, AdamW with multi_precision) saves, laid out as
the fixtures of testdata/gen/README_paddlenlp_reshard.md:

- model_state.ppYY.pdparams: paddle.save of the stage's parameters as bfloat16 paddle Tensors
  named after their variables (pickle variant A: numpy uint16 arrays plus the
  StructuredToParameterName@@ table): the names the stage's process gives them, every stage
  counting from linear_0.w_0, the head llama_lm_head_0.w_0 as PaddleNLP 2.x (the version
  config.json claims, paddlenlp_version null) names it;
- optimizer.ppYY.pdopt: paddle.save of opt.state_dict() (variant B2: (name, ndarray) tuples,
  plain dicts): `<var>_fp32_master_0_moment1_0` for every parameter of the stage, then
  `_moment2_0`, `_beta1_pow_acc_0`, `_beta2_pow_acc_0` ([1]), then `master_weights`
  {<var>: fp32 tensor named <var>_fp32_master_0}, then `LR_Scheduler`;
- config.json (LlamaForCausalLMPipe, tensor_parallel_degree 1; nothing records the PP degree)
  and generation_config.json.

Stages follow paddle's SegmentLayers(method="layer:LlamaDecoderLayer"): the embedding on the
first stage, layers / pp decoder layers per stage, the final norm and lm_head on the last.

Default shape: hidden 1024, intermediate 2816, 16 heads in 4 KV groups (GQA, head_dim 64),
8 layers, vocabulary 32000 (LLaMA's), untied lm_head: 155M parameters, each 2 bytes of bf16
weight plus 12 bytes of fp32 moments and master weight, 2.17 GB in 8 files. LLaMA-7B's widths
would give 7.5 GB at 8 layers (the optimizer state is 7x the bf16 model), so the width is
scaled down instead of the depth.

Values come from numpy's default_rng(SEED): master weights 0.02*N(0,1) (norms 1+0.1*N(0,1)),
bf16 weights their round-to-nearest-even bf16, moment1 1e-3*N(0,1), moment2 1e-6*|N(0,1)|,
beta pows 0.9^step and 0.999^step. One stage is in memory at a time. The directory is written
under OUT_DIR.tmp and renamed into place, so an interrupted run never leaves a half-written
input behind.
"""

import argparse
import collections
import json
import os
import shutil
import sys
import warnings

import numpy as np

from paddle_reshard_python import stage_vars

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import paddle

NAME_TABLE = "StructuredToParameterName@@"
# config.json's paddlenlp_version: PaddleNLP 2.x writes null
PADDLENLP_VERSION = None
ACCUMULATORS = ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc")
STEP = 2
LR = {"last_epoch": STEP, "last_lr": 0.0009045084971874737}


def default_out():
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", "ckptconv-bench", "paddle_pp4")


def layout(a):
    """[(structured name, shape, var name, pp stage)] in LlamaForCausalLM state_dict order,
    with the variable names the stage's process gives its parameters (the reference reshard's
    stage_vars: every stage counts from 0)."""
    kv = a.hidden // a.heads * a.kv_heads
    per_stage = a.layers // a.pp

    items = [("llama.embed_tokens.weight", (a.vocab, a.hidden), 0)]
    for i in range(a.layers):
        p, s = f"llama.layers.{i}.", i // per_stage
        for proj, shape in (("self_attn.q_proj", (a.hidden, a.hidden)), ("self_attn.k_proj", (a.hidden, kv)),
                            ("self_attn.v_proj", (a.hidden, kv)), ("self_attn.o_proj", (a.hidden, a.hidden)),
                            ("mlp.gate_up_fused_proj", (a.hidden, 2 * a.ffn)),
                            ("mlp.down_proj", (a.ffn, a.hidden))):
            items.append((f"{p}{proj}.weight", shape, s))
        for ln in ("input_layernorm", "post_attention_layernorm"):
            items.append((f"{p}{ln}.weight", (a.hidden,), s))
    items.append(("llama.norm.weight", (a.hidden,), a.pp - 1))
    items.append(("lm_head.weight", (a.hidden, a.vocab), a.pp - 1))
    names = {}
    for s in range(a.pp):
        names.update(stage_vars([k for k, _, ks in items if ks == s], head_class(a), {}))
    return [(k, shape, names[k], s) for k, shape, s in items]


def head_class(a):
    """The head's class as the PaddleNLP that config.json names builds it: PaddleNLP 3's
    LlamaForCausalLMPipe builds LlamaLMHeadPipe, 2.x's pipes and every single-card model
    LlamaLMHead."""
    major = int(PADDLENLP_VERSION.split(".")[0]) if PADDLENLP_VERSION else 2
    return "llama_lm_head_pipe" if a.pp > 1 and major >= 3 else "llama_lm_head"


def config(a):
    """config.json as PaddleNLP's save_pretrained writes it for a PP run (the fields of
    testdata/paddlenlp/bf16_pp2/config.json, at the benchmark's sizes)."""
    return {
        "alibi": False,
        "architectures": ["LlamaForCausalLMPipe"],
        "bos_token_id": 1,
        "dtype": "bfloat16",
        "eos_token_id": 2,
        "fuse_attention_ffn": True,
        "fuse_attention_qkv": False,
        "fuse_sequence_parallel_allreduce": False,
        "hidden_size": a.hidden,
        "initializer_range": 0.02,
        "intermediate_size": a.ffn,
        "long_sequence_init_args": {},
        "long_sequence_strategy_name": None,
        "long_sequence_strategy_type": None,
        "max_position_embeddings": 4096,
        "model_type": "llama",
        "no_recompute_layers": None,
        "num_attention_heads": a.heads,
        "num_hidden_layers": a.layers,
        "num_key_value_heads": a.kv_heads,
        "pad_token_id": 0,
        "paddlenlp_version": PADDLENLP_VERSION,
        "pp_recompute_interval": 1,
        "recompute_granularity": "full",
        "rms_norm_eps": 1e-06,
        "rope_scaling_factor": 1.0,
        "rope_scaling_type": None,
        "rope_theta": 10000.0,
        "seq_length": 4096,
        "sequence_parallel": False,
        "tensor_parallel_degree": 1,
        "tensor_parallel_output": True,
        "tie_word_embeddings": False,
        "use_fused_rms_norm": False,
        "use_fused_rope": False,
        "use_long_sequence_strategies": False,
        "use_recompute": False,
        "virtual_pp_degree": 1,
        "vocab_size": a.vocab,
    }


GENERATION_CONFIG = {"_from_model_config": True, "bos_token_id": 1, "eos_token_id": 2, "max_length": 20,
                     "no_repeat_ngram_size": 0, "pad_token_id": 0, "use_cache": False}


def to_bf16_bits(x):
    """Round-to-nearest-even bf16 bit patterns (uint16) of a finite float32 array."""
    u = x.view(np.uint32)
    r = (u >> np.uint32(16)) & np.uint32(1)
    r += np.uint32(0x7FFF)
    r += u
    r >>= np.uint32(16)
    return r.astype(np.uint16)


def tensor(a, name):
    """A paddle Tensor holding a (uint16 becomes bfloat16) with the variable name `name`."""
    t = paddle.Tensor(a, zero_copy=False, place=paddle.CPUPlace())
    t.name = name
    return t


def write_stage(rng, items, stage, tmp):
    """model_state.ppSS.pdparams and optimizer.ppSS.pdopt of one stage; returns bytes of data."""
    model = collections.OrderedDict()
    acc = {k: {} for k in ACCUMULATORS}
    master = {}
    nbytes = 0
    for name, shape, var, s in items:
        if s != stage:
            continue
        w = rng.standard_normal(shape, dtype=np.float32)
        if len(shape) == 1:
            w *= np.float32(0.1)
            w += np.float32(1.0)
        else:
            w *= np.float32(0.02)
        bits = to_bf16_bits(w)
        model[name] = tensor(bits, var)
        del bits
        key = var + "_fp32_master_0_"
        m1 = rng.standard_normal(shape, dtype=np.float32)
        m1 *= np.float32(1e-3)
        acc["moment1"][key + "moment1_0"] = tensor(m1, key + "moment1_0")
        del m1
        m2 = rng.standard_normal(shape, dtype=np.float32)
        np.abs(m2, out=m2)
        m2 *= np.float32(1e-6)
        acc["moment2"][key + "moment2_0"] = tensor(m2, key + "moment2_0")
        del m2
        for k, beta in (("beta1_pow_acc", 0.9), ("beta2_pow_acc", 0.999)):
            acc[k][f"{key}{k}_0"] = tensor(np.array([beta ** STEP], dtype=np.float32), f"{key}{k}_0")
        master[var] = tensor(w, var + "_fp32_master_0")
        del w
        nbytes += int(np.prod(shape)) * 14 + 8
    paddle.save(model, os.path.join(tmp, f"model_state.pp{stage:02d}.pdparams"))
    del model
    # opt.state_dict() is a plain dict, kept as such in variant B2 (an OrderedDict would add a
    # collections.OrderedDict global); the accumulators come kind by kind, in parameter order.
    opt = {}
    for k in ACCUMULATORS:
        opt.update(acc[k])
    del acc
    opt["master_weights"] = master
    opt["LR_Scheduler"] = dict(LR)
    paddle.save(opt, os.path.join(tmp, f"optimizer.pp{stage:02d}.pdopt"))
    return nbytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", nargs="?", default=default_out())
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=2816, help="intermediate size")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--pp", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.layers % a.pp or a.hidden % a.heads or a.heads % a.kv_heads:
        sys.exit("make_paddle_bench: layers must divide by pp, hidden by heads, heads by kv heads")

    items = layout(a)
    total = sum(int(np.prod(shape)) * 14 for _, shape, _, _ in items)
    out = os.path.abspath(a.out_dir)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    free = shutil.disk_usage(parent).free
    if free < total + (1 << 30):
        sys.exit(f"make_paddle_bench: {total / 1e9:.2f} GB needed in {parent}, only {free / 1e9:.2f} GB free")

    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    paddle.set_device("cpu")
    rng = np.random.default_rng(a.seed)
    nbytes = sum(write_stage(rng, items, s, tmp) for s in range(a.pp))
    for name, obj in (("config.json", config(a)), ("generation_config.json", GENERATION_CONFIG)):
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    params = sum(int(np.prod(shape)) for _, shape, _, _ in items)
    print(f"{out}: PP{a.pp} TP1, {a.layers} layers, {params / 1e6:.1f}M parameters, "
          f"{nbytes / 1e9:.2f} GB of tensor data, {size / 1e9:.2f} GB in {len(os.listdir(out))} files, "
          f"paddle {paddle.__version__}")


if __name__ == "__main__":
    main()
