"""Reference for `ckptconv pd2te` / `te2pd`: PaddleNLP LLaMA <-> Transformer Engine (paddle,
`te` backend) layer names, written from the format notes, in numpy only.

It reproduces the mapping of PaddleNLP's `llm/llama/te_llama_ckpt_converter.py` and fixes
what that script gets wrong (see testdata/gen/README_paddlenlp.md):

pd2te, per decoder layer `llama.layers.{i}.` (any number of digits):
  self_attn.o_proj.weight          [H/tp, H]      -> transformer.self_attention.proj.weight     [H, H/tp]  (transpose)
  input_layernorm.weight           [H]            -> transformer.self_attention.layernorm_qkv.ln_weight  (copy)
  post_attention_layernorm.weight  [H]            -> transformer.layernorm_mlp.ln_weight         (copy)
  mlp.gate_up_fused_proj.weight    [H, 2I/tp]     -> transformer.layernorm_mlp.fc1_weight        [2I/tp, H] (transpose)
  mlp.down_proj.weight             [I/tp, H]      -> transformer.layernorm_mlp.fc2_weight        [H, I/tp]  (transpose)
  self_attn.{q,k,v}_proj.weight                   -> transformer.self_attention.layernorm_qkv.weight
                                                     concat([q, k, v], axis=1).T  [(nh+2nkv)d/tp, H]
  fixes: mlp.gate_proj + mlp.up_proj (fuse_attention_ffn=False) are fused first as
         concat([gate, up], axis=1); self_attn.qkv_proj (fuse_attention_qkv=True, output axis
         interleaved per KV group [q_g0 | k_g | v_g] ...) is split per group first.
Keys outside `llama.layers.` (embed_tokens, norm, lm_head) are copied unchanged.

te2pd is the inverse; by default it writes the layout the original script writes
(unfused q/k/v, fused gate_up); `fuse_qkv=True` / `fuse_ffn=False` give the other layouts.

Head counts are GLOBAL (as on the converter's command line); `tp` is the tensor-parallel
degree of the files, so the per-file KV group count is num_key_value_heads // tp.
Arrays are never converted: bf16 stays uint16 bit patterns, and every output array is
C-contiguous, so `tobytes()` is what a writer must store.

Command line (numpy only):
  python3 llama_te_reference.py pd2te|te2pd IN_DIR OUT_JSON --heads NH --kv-heads NKV [--tp N]
      writes, per model_state*.pdparams file of IN_DIR, the expected tensors of the converted
      file (name, dtype, shape, sha256 of the bytes) as JSON; with a
      model_state.pdparams.index.json (pd2te) the files are converted together and the
      converted index is included.
"""

import argparse
import collections
import hashlib
import json
import os
import pickle
import re
import sys

import numpy as np

LAYER_RE = re.compile(r"^llama\.layers\.(\d+)\.(.+)$")
LAYER_PREFIX = "llama.layers."

# The original converter's table (suffix after llama.layers.{i}.), pd -> te.
PD2TE = {
    "self_attn.o_proj.weight": "transformer.self_attention.proj.weight",
    "input_layernorm.weight": "transformer.self_attention.layernorm_qkv.ln_weight",
    "post_attention_layernorm.weight": "transformer.layernorm_mlp.ln_weight",
    "mlp.gate_up_fused_proj.weight": "transformer.layernorm_mlp.fc1_weight",
    "mlp.down_proj.weight": "transformer.layernorm_mlp.fc2_weight",
}
TE2PD = {v: k for k, v in PD2TE.items()}
TRANSPOSED = {"self_attn.o_proj.weight", "mlp.gate_up_fused_proj.weight", "mlp.down_proj.weight"}

Q, K, V = "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"
QKV_FUSED = "self_attn.qkv_proj.weight"
GATE, UP = "mlp.gate_proj.weight", "mlp.up_proj.weight"
TE_QKV = "transformer.self_attention.layernorm_qkv.weight"
TE_FC1 = "transformer.layernorm_mlp.fc1_weight"

# numpy type string -> the dtype ckptconv reports (paddle stores bf16 as 'u2').
REPORTED_DTYPE = {"<f4": "float32", "<f2": "float16", "<f8": "float64", "<u2": "bfloat16"}


class ConversionError(ValueError):
    pass


def split_layer_name(name):
    """(layer index, suffix) for `llama.layers.{i}.{suffix}`, else (None, name)."""
    m = LAYER_RE.match(name)
    if not m:
        return None, name
    return int(m.group(1)), m.group(2)


def layer_name(i, suffix):
    return f"{LAYER_PREFIX}{i}.{suffix}"


def checkpoint_kind(names):
    """'pd' or 'te', by the original's rule: te = some key contains "transformer", pd = some
    key contains "self_attn"; both or neither is not a LLaMA checkpoint."""
    te = any("transformer" in n for n in names)
    pd = any("self_attn" in n for n in names)
    if te == pd:
        raise ConversionError("The input checkpoint is not a valid checkpoint.")
    return "te" if te else "pd"


def _c(a):
    return np.ascontiguousarray(a)


def _local_groups(num_attention_heads, num_key_value_heads, tp):
    if num_attention_heads % num_key_value_heads:
        raise ConversionError("num_attention_heads must be a multiple of num_key_value_heads")
    if num_key_value_heads % tp:
        # PaddleNLP then replicates k/v in every file; TE cannot split them (it asserts
        # num_gqa_groups % tp == 0), so there is no TE equivalent.
        raise ConversionError("num_key_value_heads must be a multiple of the TP degree")
    return num_key_value_heads // tp, num_attention_heads // num_key_value_heads


def split_fused_qkv(w, num_attention_heads, num_key_value_heads, tp=1):
    """PaddleNLP qkv_proj [H, cols] (per KV group g: G query heads, k_g, v_g) -> (q, k, v)
    with heads in natural order. A TP file holds whole groups (nkv/tp of them)."""
    ng, g = _local_groups(num_attention_heads, num_key_value_heads, tp)
    cols = w.shape[1]
    if cols % (ng * (g + 2)):
        raise ConversionError(f"qkv_proj has {cols} columns, not a multiple of {ng * (g + 2)}")
    d = cols // (ng * (g + 2))
    blocks = w.reshape(w.shape[0], ng, g + 2, d)
    q = blocks[:, :, :g, :].reshape(w.shape[0], ng * g * d)
    k = blocks[:, :, g, :].reshape(w.shape[0], ng * d)
    v = blocks[:, :, g + 1, :].reshape(w.shape[0], ng * d)
    return _c(q), _c(k), _c(v)


def fuse_qkv_paddle(q, k, v, num_attention_heads, num_key_value_heads, tp=1):
    """Inverse of split_fused_qkv: PaddleNLP's per-KV-group interleaved qkv_proj."""
    ng, g = _local_groups(num_attention_heads, num_key_value_heads, tp)
    h = q.shape[0]
    d = k.shape[1] // ng
    if q.shape[1] != ng * g * d or v.shape != k.shape:
        raise ConversionError(f"q {q.shape}, k {k.shape}, v {v.shape} do not fit the head counts")
    blocks = np.concatenate([q.reshape(h, ng, g, d), k.reshape(h, ng, 1, d),
                             v.reshape(h, ng, 1, d)], axis=2)
    return _c(blocks.reshape(h, ng * (g + 2) * d))


def te_qkv_from_pd(q, k, v):
    """TE layernorm_qkv.weight [out, in] with out = [all q | all k | all v]."""
    return _c(np.concatenate([q, k, v], axis=1).T)


def pd_qkv_from_te(w, num_attention_heads, num_key_value_heads, tp=1):
    """(q, k, v) [H, *] from TE layernorm_qkv.weight [(nh + 2nkv)d/tp, H]."""
    ng, g = _local_groups(num_attention_heads, num_key_value_heads, tp)
    rows = w.shape[0]
    if rows % (ng * (g + 2)):
        raise ConversionError(f"layernorm_qkv.weight has {rows} rows, not a multiple of {ng * (g + 2)}")
    d = rows // (ng * (g + 2))
    t = w.T
    q, k, v = np.split(t, [ng * g * d, ng * g * d + ng * d], axis=1)
    return _c(q), _c(k), _c(v)


def pd_to_te(state, num_attention_heads, num_key_value_heads, tp=1):
    """Expected TE state of ONE file (or of a whole checkpoint given as one dict).

    `state`: name -> ndarray (non-array values such as the name table are ignored).
    Output order is the original's: every other key in input order, then one fused QKV per
    layer in ascending layer order."""
    arrays = collections.OrderedDict((k, v) for k, v in state.items() if isinstance(v, np.ndarray))
    if checkpoint_kind(arrays) != "pd":
        raise ConversionError("pd2te needs a PaddleNLP checkpoint")
    out = collections.OrderedDict()
    qkv = {}    # layer -> {suffix: array}
    ffn = {}    # layer -> {GATE/UP: array}
    ffn_pos = {}
    for name, a in arrays.items():
        i, suffix = split_layer_name(name)
        if i is None:
            out[name] = _c(a)
        elif suffix in (Q, K, V, QKV_FUSED):
            qkv.setdefault(i, {})[suffix] = a
        elif suffix in (GATE, UP):
            ffn.setdefault(i, {})[suffix] = a
            if i not in ffn_pos:
                ffn_pos[i] = layer_name(i, PD2TE["mlp.gate_up_fused_proj.weight"])
                out[ffn_pos[i]] = None   # keeps fc1 where gate_proj was
        elif suffix in PD2TE:
            out[layer_name(i, PD2TE[suffix])] = _c(a.T) if suffix in TRANSPOSED else _c(a)
        else:
            raise ConversionError(f"{name}: no TE name for {suffix}")
    for i, parts in ffn.items():
        if set(parts) != {GATE, UP}:
            raise ConversionError(f"layer {i}: gate_proj and up_proj must come together")
        out[ffn_pos[i]] = _c(np.concatenate([parts[GATE], parts[UP]], axis=1).T)
    for i in sorted(qkv):
        parts = qkv[i]
        if QKV_FUSED in parts:
            if len(parts) != 1:
                raise ConversionError(f"layer {i}: qkv_proj together with q/k/v_proj")
            q, k, v = split_fused_qkv(parts[QKV_FUSED], num_attention_heads, num_key_value_heads, tp)
        elif set(parts) == {Q, K, V}:
            q, k, v = parts[Q], parts[K], parts[V]
        else:
            raise ConversionError(f"layer {i}: has {sorted(parts)}, needs q, k and v_proj")
        out[layer_name(i, TE_QKV)] = te_qkv_from_pd(q, k, v)
    return out


def te_to_pd(state, num_attention_heads, num_key_value_heads, tp=1, fuse_qkv=False, fuse_ffn=True):
    """Inverse of pd_to_te. Output order: every other key in input order (fc1 becomes
    gate_proj + up_proj in place when fuse_ffn is False), then q, k, v_proj (or qkv_proj) per
    layer in ascending layer order."""
    arrays = collections.OrderedDict((k, v) for k, v in state.items() if isinstance(v, np.ndarray))
    if checkpoint_kind(arrays) != "te":
        raise ConversionError("te2pd needs a TE checkpoint")
    out = collections.OrderedDict()
    qkv = {}
    for name, a in arrays.items():
        i, suffix = split_layer_name(name)
        if i is None:
            out[name] = _c(a)
        elif suffix == TE_QKV:
            qkv[i] = a
        elif suffix == TE_FC1 and not fuse_ffn:
            gate, up = np.split(a.T, 2, axis=1)
            out[layer_name(i, GATE)] = _c(gate)
            out[layer_name(i, UP)] = _c(up)
        elif suffix in TE2PD:
            pd = TE2PD[suffix]
            out[layer_name(i, pd)] = _c(a.T) if pd in TRANSPOSED else _c(a)
        else:
            raise ConversionError(f"{name}: no PaddleNLP name for {suffix}")
    for i in sorted(qkv):
        q, k, v = pd_qkv_from_te(qkv[i], num_attention_heads, num_key_value_heads, tp)
        if fuse_qkv:
            out[layer_name(i, QKV_FUSED)] = fuse_qkv_paddle(q, k, v, num_attention_heads,
                                                            num_key_value_heads, tp)
        else:
            out[layer_name(i, Q)] = q
            out[layer_name(i, K)] = k
            out[layer_name(i, V)] = v
    return out


def convert_name(name, mode):
    """The converted name of one key (index files). q/k/v/qkv_proj all map to the fused TE
    key; in te2pd the fused key maps to the three unfused keys (a list)."""
    i, suffix = split_layer_name(name)
    if i is None:
        return name
    if mode == "pd2te":
        if suffix in (Q, K, V, QKV_FUSED):
            return layer_name(i, TE_QKV)
        if suffix in (GATE, UP):
            return layer_name(i, TE_FC1)
        if suffix in PD2TE:
            return layer_name(i, PD2TE[suffix])
    else:
        if suffix == TE_QKV:
            return [layer_name(i, Q), layer_name(i, K), layer_name(i, V)]
        if suffix in TE2PD:
            return layer_name(i, TE2PD[suffix])
    raise ConversionError(f"{name}: no {mode} name")


def pd_to_te_files(files, num_attention_heads, num_key_value_heads, tp=1, index=None):
    """A size-sharded checkpoint (one TP rank): files = {file name: state}. q, k and v of a
    layer may sit in different files, so the fused QKV is built across files and placed in
    the file that held q_proj (or qkv_proj); gate/up likewise go to gate_proj's file.
    Returns ({file name: converted state}, converted index or None)."""
    merged = collections.OrderedDict()
    owner = {}
    for fname, state in files.items():
        for k, v in state.items():
            if isinstance(v, np.ndarray):
                merged[k] = v
                owner[k] = fname
    conv = pd_to_te(merged, num_attention_heads, num_key_value_heads, tp)
    home = {}
    for k, fname in owner.items():
        i, suffix = split_layer_name(k)
        if suffix in (K, V, UP):
            continue
        home.setdefault(convert_name(k, "pd2te"), fname)
    out = collections.OrderedDict((f, collections.OrderedDict()) for f in files)
    for k, v in conv.items():
        out[home[k]][k] = v
    new_index = None
    if index is not None:
        # Renamed in the input's order; q/k/v (gate/up) collapse into one entry where the
        # first of them was. Other fields (metadata.total_size: same bytes) are copied.
        where = {k: f for f, st in out.items() for k in st}
        wm = collections.OrderedDict()
        for k in index["weight_map"]:
            name = convert_name(k, "pd2te")
            wm.setdefault(name, where[name])
        assert set(wm) == set(where), "index and files disagree"
        new_index = collections.OrderedDict(weight_map=wm)
        for k, v in index.items():
            if k != "weight_map":
                new_index[k] = v
    return out, new_index


# ---------------------------------------------------------------------------------------
# Files and records

def load_pdparams(path):
    """name -> ndarray of a paddle.save state dict, by plain pickle (numpy globals only);
    the name table and other non-array values are dropped."""
    with open(path, "rb") as f:
        obj = pickle.load(f, encoding="latin1")
    return collections.OrderedDict((k, v) for k, v in obj.items() if isinstance(v, np.ndarray))


def record(name, a):
    a = np.ascontiguousarray(a)
    return {
        "name": name,
        "dtype": REPORTED_DTYPE.get(a.dtype.str, a.dtype.str),
        "numpy_dtype": a.dtype.str,
        "shape": list(a.shape),
        "sha256": hashlib.sha256(a.tobytes()).hexdigest(),
    }


def records(state):
    return [record(k, v) for k, v in state.items()]


def model_files(directory):
    """The files the original converts: model_state*.pdparams, sorted."""
    return sorted(f for f in os.listdir(directory)
                  if f.startswith("model_state") and f.endswith(".pdparams"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["pd2te", "te2pd"])
    p.add_argument("input_dir")
    p.add_argument("output_json")
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, required=True)
    p.add_argument("--tp", type=int, default=1)
    a = p.parse_args(argv)
    result = {"mode": a.mode, "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
              "tensor_parallel_degree": a.tp, "files": {}}
    index_path = os.path.join(a.input_dir, "model_state.pdparams.index.json")
    if a.mode == "pd2te" and os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as fh:
            index = json.load(fh, object_pairs_hook=collections.OrderedDict)
        files = collections.OrderedDict(
            (f, load_pdparams(os.path.join(a.input_dir, f))) for f in model_files(a.input_dir))
        conv, result["index"] = pd_to_te_files(files, a.heads, a.kv_heads, a.tp, index)
        result["files"] = {f: records(st) for f, st in conv.items()}
    else:
        for f in model_files(a.input_dir):
            st = load_pdparams(os.path.join(a.input_dir, f))
            conv = (pd_to_te if a.mode == "pd2te" else te_to_pd)(st, a.heads, a.kv_heads, a.tp)
            result["files"][f] = records(conv)
    with open(a.output_json, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
