"""The Python way to do `ckptconv reshard IN OUT --tp N --pp M` on a PaddleNLP LLaMA checkpoint,
for comparison: what PaddleNLP's merge/split tooling does today (paddle.load of every rank file,
merge by _get_tensor_parallel_mappings' rules, split again, paddle.save per target rank),
written out in numpy.

Run with the venv Python (paddlepaddle + numpy):

    paddle_reshard_python.py IN OUT --tp N --pp M
    paddle_reshard_python.py --compare A B     (exit 1 unless A and B hold the same checkpoint)

Reshard:
- every `model_state[.tpXX][_ppYY].pdparams` and `optimizer[...].pdopt` of IN is paddle.load-ed
  (return_numpy=True; the model files' StructuredToParameterName@@ table kept) at once;
- TP ranks are merged and then split to the target degree with PaddleNLP 2.8's LLaMA rules
  (LlamaForCausalLM._get_tensor_parallel_mappings): column parallel (last axis) for q_proj,
  k_proj/v_proj when num_key_value_heads % tp == 0 (replicated otherwise), qkv_proj,
  gate_proj, up_proj and lm_head [hidden, vocab] (replicated when vocab % tp != 0); row
  parallel (axis 0) for o_proj, down_proj and embed_tokens (replicated when vocab % tp != 0);
  gate_up_fused_proj as a naive 2-fuse (rank r holds [gate_r | up_r]); everything else
  (RMSNorm weights) replicated;
- optimizer moments and master weights follow their parameter, found through the name table
  of their own stage (<var>_fp32_master_0_<acc>_0 or <var>_<acc>_0 -> <var> -> structured
  name: variable names are a process's own, every pipeline stage counting from linear_0.w_0,
  so they collide across stages); beta pow accumulators ([1]) and LR_Scheduler are copied to
  every rank;
- PP stages are joined, then cut again with paddle's SegmentLayers over LlamaForCausalLMPipe's
  layer list (method "layer:LlamaDecoderLayer" when layers % pp == 0, else "uniform"), the
  method PaddleNLP uses; structured names keep their global layer numbers;
- variable names are those each target rank's process gives its parameters: per class
  (linear, embedding, create_parameter for the RMSNorm weights, the head) a counter from 0 in
  the stage's state-dict order (the TP ranks of a stage share them); the head is
  llama_lm_head_pipe_N in a PaddleNLP 3 pipeline, llama_lm_head_N in 2.x's and single-card
  (the source's pipeline head tells which, else config.json's paddlenlp_version);
- every target file is written with paddle.save of paddle Tensors carrying their variable names:
  model files as the model's state_dict order plus the name table (variant A), optimizer files
  as opt.state_dict() orders them (every moment1, then moment2, beta1 pows, beta2 pows, each in
  parameter order, then master_weights {var: tensor named <var>_fp32_master_0}, then
  LR_Scheduler; (name, array) tuples when there are master weights, variant B2);
- config.json: tensor_parallel_degree and architectures as PaddleNLP writes them for the
  target (LlamaForCausalLMPipe when pp > 1, else LlamaForCausalLM; the degree when tp > 1, and
  at TP 1 with a pipeline in 2.x); every other regular file of IN is copied.

Compare: the same set of files, equal config.json, and every model/optimizer file equal after
pickle.load: keys and their order, name table, tuple names, dtypes, shapes and the bytes of
every array. Prints one line: how many files and tensors were compared.
"""

import argparse
import collections
import json
import os
import pickle
import re
import shutil
import sys
import warnings

import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import paddle
    from paddle.distributed.fleet.meta_parallel.parallel_layers.pp_layers import LayerDesc, SegmentLayers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from paddlenlp_merge import merge, rule  # noqa: E402  (PaddleNLP 2.8's TP rules, checked against PaddleNLP)

NAME_TABLE = "StructuredToParameterName@@"
FILE_RE = re.compile(r"^(model_state|optimizer)(?:\.(tp\d\d)?_?(pp\d\d)?)?\.(pdparams|pdopt)$")
ACC_RE = re.compile(r"^(.*?)(_fp32_master_0)?_(moment1|moment2|beta1_pow_acc|beta2_pow_acc)_0$")


# ------------------------------------------------------------------------ layout

def parse_files(d):
    """{(kind, tp_rank, pp_rank): file}, tp, pp."""
    grid = {}
    for f in sorted(os.listdir(d)):
        m = FILE_RE.match(f)
        if not m or (m.group(1) == "model_state") != (m.group(4) == "pdparams"):
            continue
        kind = "model" if m.group(1) == "model_state" else "optimizer"
        tp_r = int(m.group(2)[2:]) if m.group(2) else 0
        pp_r = int(m.group(3)[2:]) if m.group(3) else 0
        grid[(kind, tp_r, pp_r)] = f
    if not any(k[0] == "model" for k in grid):
        sys.exit(f"paddle_reshard_python: no model_state*.pdparams in {d}")
    tp = 1 + max(r for (_, r, _) in grid)
    pp = 1 + max(s for (_, _, s) in grid)
    for kind in ("model", "optimizer"):
        have = {(r, s) for (k, r, s) in grid if k == kind}
        if have and have != {(r, s) for r in range(tp) for s in range(pp)}:
            sys.exit(f"paddle_reshard_python: {d}: {kind} files for ranks {sorted(have)}, TP{tp} PP{pp} expected")
    return grid, tp, pp


def suffix(tp, r, pp, s):
    """TrainingArguments.weight_name_suffix: tp part only when tp > 1, pp part only when pp > 1."""
    parts = []
    if tp > 1:
        parts.append(f"tp{r:02d}")
    if pp > 1:
        parts.append(f"pp{s:02d}")
    return "." + "_".join(parts) if parts else ""


class LlamaEmbeddingPipe(paddle.nn.Layer):
    pass


class LlamaDecoderLayerPipe(paddle.nn.Layer):
    pass


class LlamaRMSNormPipe(paddle.nn.Layer):
    pass


class LlamaLMHead(paddle.nn.Layer):
    pass


def pp_prefixes(layers, pp):
    """{key prefix: stage}: SegmentLayers over LlamaForCausalLMPipe's layer list."""
    descs = ([LayerDesc(LlamaEmbeddingPipe)] + [LayerDesc(LlamaDecoderLayerPipe) for _ in range(layers)]
             + [LayerDesc(LlamaRMSNormPipe), LayerDesc(LlamaLMHead)])
    prefixes = (["llama.embed_tokens."] + [f"llama.layers.{i}." for i in range(layers)]
                + ["llama.norm.", "lm_head."])
    method = "layer:LlamaDecoderLayer" if layers % pp == 0 else "uniform"
    bounds = SegmentLayers(descs, num_parts=pp, method=method).do_segment()
    return {prefixes[i]: s for s in range(pp) for i in range(bounds[s], bounds[s + 1])}


def stage_of(key, prefixes):
    hits = [s for p, s in prefixes.items() if key.startswith(p)]
    if len(hits) != 1:
        sys.exit(f"paddle_reshard_python: {key}: no pipeline stage")
    return hits[0]


# ------------------------------------------------------------------------ variable names

LINEARS = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
           "self_attn.qkv_proj.weight", "self_attn.o_proj.weight", "mlp.gate_proj.weight",
           "mlp.up_proj.weight", "mlp.gate_up_fused_proj.weight", "mlp.down_proj.weight")
LAYER_RE = re.compile(r"^llama\.layers\.\d+\.(.+)$")


def paddlenlp_major(cfg):
    """The PaddleNLP major version config.json claims: paddlenlp_version null is 2.x (which
    writes it so), absent is taken as 3."""
    v = cfg.get("paddlenlp_version", "3")
    if v is None:
        return 2
    return int(v.split(".")[0]) if isinstance(v, str) and v[:1].isdigit() else 3


def head_class(cfg, src_head, spp, pp):
    """The head's class at the target layout: LlamaLMHead single-card; in a pipeline the one
    the source's pipeline head shows (PaddleNLP 3's LlamaLMHeadPipe, 2.x's LlamaLMHead), else
    the one of the PaddleNLP version config.json claims."""
    if pp <= 1:
        return "llama_lm_head"
    if src_head and src_head.startswith("llama_lm_head_pipe_"):
        return "llama_lm_head_pipe"
    if src_head and spp > 1 and src_head.startswith("llama_lm_head_"):
        return "llama_lm_head"
    return "llama_lm_head_pipe" if paddlenlp_major(cfg) >= 3 else "llama_lm_head"


def stage_vars(keys, head, src_var):
    """{structured name: variable name} of one stage's parameters as its process names them:
    paddle's unique_name counts per class (linear, embedding, create_parameter for the RMSNorm
    weights, the head's class) and per process, and a pipeline process builds only its own
    stage, in state-dict order. A tensor PaddleNLP's LLaMA does not build keeps its name."""
    counts = collections.Counter()
    out = {}
    for k in keys:
        m = LAYER_RE.match(k)
        if k == "llama.embed_tokens.weight":
            cls = "embedding"
        elif k == "lm_head.weight":
            cls = head
        elif k == "llama.norm.weight" or (m and m.group(1) in ("input_layernorm.weight",
                                                                 "post_attention_layernorm.weight")):
            cls = "create_parameter"
        elif m and m.group(1) in LINEARS:
            cls = "linear"
        else:
            out[k] = src_var[k]
            continue
        out[k] = f"{cls}_{counts[cls]}.w_0"
        counts[cls] += 1
    return out


# ------------------------------------------------------------------------ TP rules

def split(a, how, tp, r):
    if tp == 1 or how == "replicated":
        return a
    if how == "column":
        return np.split(a, tp, axis=-1)[r]
    if how == "row":
        return np.split(a, tp, axis=0)[r]
    if how == "naive_2fuse_column":
        gate, up = np.split(a, 2, axis=-1)
        return np.concatenate([np.split(gate, tp, axis=-1)[r], np.split(up, tp, axis=-1)[r]], axis=-1)
    raise ValueError(how)


def tensor(a, name):
    """A paddle Tensor of a (uint16 becomes bfloat16) named `name`, as paddle.save wants it."""
    t = paddle.Tensor(np.ascontiguousarray(a), zero_copy=False, place=paddle.CPUPlace())
    t.name = name
    return t


# ------------------------------------------------------------------------ reshard

def load(path, **kw):
    return paddle.load(path, return_numpy=True, **kw)


def reshard(src, dst, tp, pp):
    paddle.set_device("cpu")
    grid, stp, spp = parse_files(src)
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    nkv = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    vocab, layers = cfg["vocab_size"], cfg["num_hidden_layers"]
    if layers < pp:
        sys.exit(f"paddle_reshard_python: {layers} layers cannot make {pp} pipeline stages")

    # Load every rank file, merge TP, join PP. Variable names are each stage's own (every stage
    # counts from linear_0.w_0), so the optimizer state is keyed by structured name, found
    # through the name table of its own stage.
    model = collections.OrderedDict()
    src_var = {}            # structured name -> the source's variable name
    stage_key = []          # per source stage: var -> structured name
    for s in range(spp):
        ranks = [load(os.path.join(src, grid[("model", r, s)]), keep_name_table=True) for r in range(stp)]
        table = ranks[0].get(NAME_TABLE)
        if table is None:
            sys.exit(f"paddle_reshard_python: {grid[('model', 0, s)]}: no {NAME_TABLE}")
        src_var.update(table)
        stage_key.append({v: k for k, v in table.items()})
        for k in ranks[0]:
            if k != NAME_TABLE:
                model[k] = merge([x[k] for x in ranks], rule(k, stp, nkv, vocab), k)
        del ranks
    key_order = {k: i for i, k in enumerate(model)}
    # optimizer: accumulators as (structured name, (master?, kind)) -> array; master weights
    # structured name -> array
    acc, master, lr, acc_kinds = {}, {}, None, []
    for s in range(spp):
        if ("optimizer", 0, s) not in grid:
            continue
        var_key = stage_key[s]
        ranks = [load(os.path.join(src, grid[("optimizer", r, s)])) for r in range(stp)]
        for k, v in ranks[0].items():
            if k == "LR_Scheduler":
                lr = v
            elif k == "master_weights":
                for var in v:
                    if var not in var_key:
                        sys.exit(f"paddle_reshard_python: master weight {var}: no parameter in the name table")
                    key = var_key[var]
                    master[key] = merge([x[k][var] for x in ranks], rule(key, stp, nkv, vocab), var)
            elif k != NAME_TABLE:
                m = ACC_RE.match(k)
                if not m or m.group(1) not in var_key:
                    sys.exit(f"paddle_reshard_python: optimizer key {k}: no parameter in the name table")
                key, kind = var_key[m.group(1)], (m.group(2) or "", m.group(3))
                if kind not in acc_kinds:
                    acc_kinds.append(kind)
                parts = [x[k] for x in ranks]
                how = "replicated" if parts[0].shape == (1,) else rule(key, stp, nkv, vocab)
                acc[(key, kind)] = merge(parts, how, k)
        del ranks
    have_opt = bool(acc or master)
    acc_kinds.sort(key=lambda kind: ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc").index(kind[1]))

    # Split to the target layout and save, each stage's variables named as its process names them.
    prefixes = pp_prefixes(layers, pp)
    head = head_class(cfg, src_var.get("lm_head.weight"), spp, pp)
    os.makedirs(dst, exist_ok=True)
    if os.listdir(dst):
        sys.exit(f"paddle_reshard_python: output directory {dst} is not empty")
    for s in range(pp):
        keys = sorted((k for k in model if stage_of(k, prefixes) == s), key=key_order.__getitem__)
        names = stage_vars(keys, head, src_var)
        for r in range(tp):
            out = collections.OrderedDict()
            for k in keys:
                out[k] = tensor(split(model[k], rule(k, tp, nkv, vocab), tp, r), names[k])
            paddle.save(out, os.path.join(dst, f"model_state{suffix(tp, r, pp, s)}.pdparams"))
            del out
            if not have_opt:
                continue
            opt = {}   # a plain dict, as opt.state_dict() is (kept as such in variant B2)
            for kind in acc_kinds:
                for k in keys:
                    a = acc.get((k, kind))
                    if a is None:
                        continue
                    name = f"{names[k]}{kind[0]}_{kind[1]}_0"
                    how = "replicated" if a.shape == (1,) else rule(k, tp, nkv, vocab)
                    opt[name] = tensor(split(a, how, tp, r), name)
            if master:
                opt["master_weights"] = {
                    names[k]: tensor(split(master[k], rule(k, tp, nkv, vocab), tp, r), names[k] + "_fp32_master_0")
                    for k in keys if k in master}
            if lr is not None:
                opt["LR_Scheduler"] = dict(lr)
            paddle.save(opt, os.path.join(dst, f"optimizer{suffix(tp, r, pp, s)}.pdopt"))
            del opt

    major = paddlenlp_major(cfg)
    cfg = dict(cfg)
    cfg["architectures"] = ["LlamaForCausalLMPipe" if pp > 1 else "LlamaForCausalLM"]
    # LlamaForCausalLMPipe records 1 at TP 1, which PaddleNLP 3 (1 its default) leaves out
    if tp > 1 or (pp > 1 and major < 3):
        cfg["tensor_parallel_degree"] = tp
    else:
        cfg.pop("tensor_parallel_degree", None)
    with open(os.path.join(dst, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    for f in sorted(os.listdir(src)):
        p = os.path.join(src, f)
        if f != "config.json" and not FILE_RE.match(f) and os.path.isfile(p):
            shutil.copyfile(p, os.path.join(dst, f))


# ------------------------------------------------------------------------ compare

def flat(obj, prefix=""):
    """[(path, tuple name or None, dtype, shape, bytes) or (path, value)] of a pickled state."""
    out = []
    for k, v in obj.items():
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], np.ndarray):
            a = np.ascontiguousarray(v[1])
            out.append((prefix + k, v[0], a.dtype.str, a.shape, a.tobytes()))
        elif isinstance(v, np.ndarray):
            a = np.ascontiguousarray(v)
            out.append((prefix + k, None, a.dtype.str, a.shape, a.tobytes()))
        elif isinstance(v, dict) and k not in (NAME_TABLE, "LR_Scheduler"):
            out += flat(v, prefix + k + "/")
        else:
            out.append((prefix + k, v))
    return out


def compare(a, b):
    fa = sorted(f for f in os.listdir(a) if os.path.isfile(os.path.join(a, f)))
    fb = sorted(f for f in os.listdir(b) if os.path.isfile(os.path.join(b, f)))
    if fa != fb:
        return f"different files: {fa} vs {fb}"
    cfg = [json.load(open(os.path.join(d, "config.json"), encoding="utf-8")) for d in (a, b)]
    if cfg[0] != cfg[1]:
        diff = sorted(k for k in set(cfg[0]) | set(cfg[1]) if cfg[0].get(k) != cfg[1].get(k))
        return f"config.json differs in {diff}"
    nfiles = ntensors = nbytes = 0
    for f in fa:
        if not FILE_RE.match(f):
            continue
        x = flat(pickle.load(open(os.path.join(a, f), "rb")))
        y = flat(pickle.load(open(os.path.join(b, f), "rb")))
        if len(x) != len(y):
            return f"{f}: {len(x)} entries vs {len(y)}"
        for p, q in zip(x, y):
            if p != q:
                return f"{f}: first difference at {p[0]} / {q[0]}: {p[1:4] if len(p) > 2 else p[1]} vs " \
                       f"{q[1:4] if len(q) > 2 else q[1]}" + (" (data)" if p[:4] == q[:4] else "")
            if len(p) > 2:
                ntensors += 1
                nbytes += len(p[4])
        nfiles += 1
        del x, y
    return f"{nfiles} checkpoint files, {ntensors} tensors ({nbytes / 1e9:.2f} GB) bit-identical, " \
           f"same keys, order, names and config.json"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--tp", type=int)
    ap.add_argument("--pp", type=int)
    ap.add_argument("--compare", action="store_true", help="compare the checkpoints SRC and DST instead")
    a = ap.parse_args()
    if a.compare:
        msg = compare(a.src, a.dst)
        print(msg)
        return 0 if "bit-identical" in msg else 1
    if not a.tp or not a.pp or a.tp < 1 or a.pp < 1:
        ap.error("--tp N and --pp M (positive) are required")
    reshard(a.src, a.dst, a.tp, a.pp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
