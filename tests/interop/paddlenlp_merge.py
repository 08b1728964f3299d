"""Merges a PaddleNLP LLaMA checkpoint directory of any TP x PP layout back to the single-card
(TP1) state and prints {name: sha256} of the model and the optimizer.

    python tests/interop/paddlenlp_merge.py DIR [--json OUT]

Needs numpy and paddle only (paddle.load(return_numpy=True) reads the files). The TP rules are
PaddleNLP 2.8's LlamaForCausalLM._get_tensor_parallel_mappings, written out in numpy; the
fixture generator (testdata/gen/gen_paddlenlp_reshard.py) checks them against PaddleNLP itself:
- column parallel (concatenate on the last axis): q_proj, k_proj/v_proj when
  num_key_value_heads % tp == 0 (replicated otherwise), qkv_proj, gate_proj, up_proj, and
  lm_head.weight [hidden, vocab] when vocab % tp == 0 (replicated otherwise);
- row parallel (concatenate on axis 0): o_proj, down_proj, and embed_tokens.weight when
  vocab % tp == 0 (replicated otherwise);
- gate_up_fused_proj, "naive 2-fuse": rank r holds [gate_r | up_r] on the last axis; the merge
  is [gate_0 .. gate_{tp-1} | up_0 .. up_{tp-1}];
- everything else (RMSNorm weights) is replicated; replicated tensors must be equal on every
  rank.
The name table is read with pickle (paddle.load drops it).
PP stages are joined by union; a key must be in exactly one stage. Optimizer moments and
master weights follow their parameter: an optimizer key is <var>_<accumulator> or
<var>_fp32_master_0_<accumulator>, and the stage's model files' name table
(StructuredToParameterName@@) maps the structured name to <var>. Variable names are a
process's own: every pipeline stage of a real run names its parameters from linear_0.w_0 on, so
<var> means something only within its stage. Beta pow accumulators ([1]) and LR_Scheduler must
be equal on every rank.

Output JSON: {"model": {name: sha256}, "optimizer": {name: sha256}, "shapes": {"model": {name:
[dtype, shape]}, "optimizer": {...}}, "lr_scheduler": {...}}; optimizer names are
<structured name>/<accumulator> ("llama.norm.weight/moment1_0"; with master weights
"llama.norm.weight/fp32_master_0_moment1_0"), master weights master_weights/<structured name>,
so that every layout gives the same names. sha256 is of the
C-contiguous raw bytes (bfloat16 as its uint16 bit patterns).
"""

import argparse
import hashlib
import json
import os
import pickle
import re
import sys

import numpy as np

NAME_TABLE = "StructuredToParameterName@@"
FILE_RE = re.compile(r"^(model_state|optimizer)(?:\.((?:tp\d\d)?(?:_?pp\d\d)?))?\.(pdparams|pdopt)$")


def load(path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import paddle
    return paddle.load(path, return_numpy=True)


def name_table(path):
    """The StructuredToParameterName@@ table of a .pdparams (paddle.load drops it, so the file
    is read with pickle)."""
    with open(path, "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    return raw.get(NAME_TABLE) if isinstance(raw, dict) else None


def as_bits(a):
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":          # ml_dtypes bfloat16, if paddle returns it
        return a.view(np.uint16), "bfloat16"
    return a, {"<f4": "float32", "<u2": "bfloat16", "<f2": "float16"}.get(a.dtype.str, a.dtype.str)


def sha(a):
    return hashlib.sha256(as_bits(a)[0].tobytes()).hexdigest()


def parse_files(d):
    """{(kind, tp_rank, pp_rank): file} with kind model/optimizer, plus (tp, pp)."""
    grid = {}
    for f in sorted(os.listdir(d)):
        m = FILE_RE.match(f)
        if not m:
            continue
        kind = "model" if m.group(1) == "model_state" else "optimizer"
        if (kind == "model") != (m.group(3) == "pdparams"):
            continue
        variant = m.group(2) or ""
        tp_m = re.search(r"tp(\d\d)", variant)
        pp_m = re.search(r"pp(\d\d)", variant)
        grid[(kind, int(tp_m.group(1)) if tp_m else 0, int(pp_m.group(1)) if pp_m else 0)] = f
    if not grid:
        raise SystemExit(f"{d}: no model_state*.pdparams")
    tp = 1 + max(r for (_, r, _) in grid)
    pp = 1 + max(s for (_, _, s) in grid)
    for kind in ("model", "optimizer"):
        have = {(r, s) for (k, r, s) in grid if k == kind}
        if kind == "optimizer" and not have:
            continue
        want = {(r, s) for r in range(tp) for s in range(pp)}
        if have != want:
            raise SystemExit(f"{d}: {kind} files for (tp, pp) ranks {sorted(have)}, expected {sorted(want)}")
    return grid, tp, pp


def rule(key, tp, nkv, vocab):
    """PaddleNLP 2.8 LLaMA TP rule of a structured model key."""
    if tp == 1:
        return "replicated"
    if key.endswith("embed_tokens.weight"):
        return "row" if vocab % tp == 0 else "replicated"
    if key.endswith("lm_head.weight"):
        return "column" if vocab % tp == 0 else "replicated"
    if key.endswith(("self_attn.q_proj.weight", "self_attn.qkv_proj.weight",
                     "mlp.gate_proj.weight", "mlp.up_proj.weight")):
        return "column"
    if key.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight")):
        return "column" if nkv % tp == 0 else "replicated"
    if key.endswith("mlp.gate_up_fused_proj.weight"):
        return "naive_2fuse_column"
    if key.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
        return "row"
    return "replicated"


def merge(parts, how, what):
    if len(parts) == 1:
        return parts[0]
    if how == "column":
        return np.concatenate(parts, axis=-1)
    if how == "row":
        return np.concatenate(parts, axis=0)
    if how == "naive_2fuse_column":
        halves = [np.split(p, 2, axis=-1) for p in parts]
        return np.concatenate([h[0] for h in halves] + [h[1] for h in halves], axis=-1)
    first = np.ascontiguousarray(parts[0])
    for p in parts[1:]:
        if p.dtype != first.dtype or p.shape != first.shape or \
                np.ascontiguousarray(p).tobytes() != first.tobytes():
            raise SystemExit(f"{what}: replicated tensor differs between TP ranks")
    return parts[0]


def param_var(key, vars_):
    """The parameter variable an optimizer key belongs to (the longest var name that prefixes
    it followed by '_')."""
    hits = [v for v in vars_ if key.startswith(v + "_")]
    if not hits:
        raise SystemExit(f"optimizer key {key}: no parameter in the name table")
    return max(hits, key=len)


def merge_dir(d):
    grid, tp, pp = parse_files(d)
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    nkv = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    vocab = cfg["vocab_size"]
    model, opt, shapes_m, shapes_o = {}, {}, {}, {}
    stage_vars = []
    lr = None
    for s in range(pp):
        ranks = [load(os.path.join(d, grid[("model", r, s)])) for r in range(tp)]
        tables = [name_table(os.path.join(d, grid[("model", r, s)])) for r in range(tp)]
        table = tables[0]
        if table is None:
            raise SystemExit(f"{grid[('model', 0, s)]}: no {NAME_TABLE}")
        if any(t != table for t in tables):
            raise SystemExit(f"stage {s}: name tables differ between TP ranks")
        stage_vars.append({v: k for k, v in table.items()})
        for k in ranks[0]:
            if k == NAME_TABLE:
                continue
            if k in model:
                raise SystemExit(f"{k}: in more than one pipeline stage")
            parts = [x[k] for x in ranks]
            model[k] = merge(parts, rule(k, tp, nkv, vocab), k)
    for s in range(pp):
        if ("optimizer", 0, s) not in grid:
            continue
        var_to_key = stage_vars[s]
        ranks = [load(os.path.join(d, grid[("optimizer", r, s)])) for r in range(tp)]
        for k, v in ranks[0].items():
            if k == NAME_TABLE:
                continue
            if k == "LR_Scheduler":
                if any(x[k] != v for x in ranks) or (lr is not None and lr != v):
                    raise SystemExit("LR_Scheduler differs between files")
                lr = v
                continue
            if k == "master_weights":
                for var in v:
                    name = f"master_weights/{var_to_key[var]}"
                    if name in opt:
                        raise SystemExit(f"{name}: in more than one pipeline stage")
                    how = rule(var_to_key[var], tp, nkv, vocab)
                    opt[name] = merge([x[k][var] for x in ranks], how, name)
                continue
            base = k.split("_fp32_master_0_")[0] + "_" if "_fp32_master_0_" in k else k
            var = param_var(base, var_to_key)
            name = f"{var_to_key[var]}/{k[len(var) + 1:]}"
            if name in opt:
                raise SystemExit(f"{k}: in more than one pipeline stage")
            parts = [x[k] for x in ranks]
            how = "replicated" if parts[0].shape == (1,) else rule(var_to_key[var], tp, nkv, vocab)
            opt[name] = merge(parts, how, k)
    for name, a in model.items():
        shapes_m[name] = [as_bits(a)[1], list(a.shape)]
    for name, a in opt.items():
        shapes_o[name] = [as_bits(a)[1], list(a.shape)]
    return {"model": {k: sha(a) for k, a in model.items()},
            "optimizer": {k: sha(a) for k, a in opt.items()},
            "shapes": {"model": shapes_m, "optimizer": shapes_o},
            "lr_scheduler": lr}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--json", help="write the JSON here (default: stdout)")
    a = p.parse_args(argv)
    out = merge_dir(a.dir)
    text = json.dumps(out, indent=1, sort_keys=True) + "\n"
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
