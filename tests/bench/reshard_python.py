#!/usr/bin/env python3
"""Reshards a Megatron-LM legacy checkpoint (--ckpt-format torch) the way it is done in Python
today, with torch only: the reference `ckptconv reshard` is compared with in
tests/bench/reshard.sh.

    reshard_python.py IN OUT --tp N --pp M [--vpp K] [--no-optimizer] [--true-vocab-size V]

IN is a checkpoint root (latest_checkpointed_iteration.txt, iter_NNNNNNN/mp_rank_TT[_PPP]/
model_optim_rng.pt). Every rank file is loaded with torch.load; the full (TP1, global layer
numbers) model is rebuilt with the rules of megatron.md, then cut for the
target layout and each target rank file is written with torch.save:

- TP (§3, §4): column-parallel tensors (fused QKV: contiguous dim-0 chunks, each rank holds
  whole query groups) concatenated/chunked on dim 0, row-parallel (linear_proj, linear_fc2
  weights) on dim 1, SwiGLU linear_fc1 as [gate_r; up_r] per rank, vocabulary tables on dim 0;
  replicated tensors (norms, row-parallel biases, position embeddings) from TP rank 0.
- Vocabulary (§4.3): the tables are padded to Megatron's Vp = ceil(V / (div x TP)) x div x TP
  for the target TP, V the true vocabulary (args: NullTokenizer = vocab_size + 1 with its EOD;
  else args.vocab_size, else --true-vocab-size; unknown: only ever grow). New rows are zeros
  (weights, fp32 masters and Adam moments alike); only rows past V are ever cut.
- PP/VPP (§5): decoder.layers.{i} renumbered from the source chunk offsets to the target's
  (even split); embeddings on the first chunk, final norm and output layer on the last.
  Key order within a chunk is the source's (Megatron's module order).
- Optimizer (non-distributed; megatron/core/optimizer _get_param_groups): every rank's
  parameters in named_parameters() order (model chunks in order), split into the param
  groups by Megatron's standard rule (`*.bias` and 1-D tensors: wd_mult 0), numbered group
  after group as torch's state_dict does. exp_avg / exp_avg_sq and the fp32_from_fp16_params
  masters are concatenated and cut like their parameters; `step` and the group
  hyper-parameters are copied, and so are the masters' pickled tensor attributes
  (tensor_model_parallel, partition_dim, ...: the same at every TP).
- Other entries: each target rank takes them from a template source rank, the one at the same
  coordinates, with a coordinate the source lacks taken as 0 (so rng states stay per rank
  where they can); `args` is copied from it with tensor_model_parallel_size,
  pipeline_model_parallel_size, transformer_pipeline_model_parallel_size,
  virtual_pipeline_model_parallel_size, num_layers_per_virtual_pipeline_stage,
  padded_vocab_size and (dense models, when it equalled TP: Megatron's default)
  expert_tensor_parallel_size set as a Megatron run at the target layout records them;
  per-run fields (rank, world_size, save, load, ...) stay the template's.

Tied embeddings with PP > 1, expert parallelism, uneven pipeline splits and the distributed
optimizer (distrib_optim.pt) are not handled: the script stops.
"""

import argparse
import copy
import os
import shutil
import sys
from collections import OrderedDict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ckpt as mc  # noqa: E402


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inp", metavar="IN")
    ap.add_argument("out", metavar="OUT")
    ap.add_argument("--tp", type=int, required=True)
    ap.add_argument("--pp", type=int, required=True)
    ap.add_argument("--vpp", type=int, default=1)
    ap.add_argument("--no-optimizer", action="store_true")
    ap.add_argument("--true-vocab-size", type=int, default=None)
    ap.add_argument("--force", action="store_true")
    o = ap.parse_args()
    TP2, PP2, VP2 = o.tp, o.pp, o.vpp

    # ---- load everything
    tracker, sub, files = mc.rank_files(o.inp)
    sds = {k: mc.load(p) for k, p in files.items()}
    a0 = sds[(0, 0)]["args"]
    TP, PP = a0.tensor_model_parallel_size, a0.pipeline_model_parallel_size
    if sorted(files) != [(t, p) for t in range(TP) for p in range(PP)]:
        raise SystemExit(f"{o.inp}: rank directories do not match TP {TP} x PP {PP} of args")
    VP = len(mc.model_chunks(sds[(0, 0)]))
    L, swiglu = a0.num_layers, bool(a0.swiglu)
    if L % (PP * VP) or L % (PP2 * VP2) or (VP2 > 1 and PP2 < 2):
        raise SystemExit(f"{L} layers: source PP{PP} VPP{VP} or target PP{PP2} VPP{VP2} is not an even split")
    for name in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                 "pipeline_model_parallel_layout"):
        if getattr(a0, name, None) is not None:
            raise SystemExit(f"args.{name} is set: uneven pipeline splits are not handled here")
    tied = not getattr(a0, "untie_embeddings_and_output_weights", False)
    if tied and (PP > 1 or PP2 > 1):
        raise SystemExit("tied embeddings with pipeline parallelism are not handled here")
    with_opt = not o.no_optimizer and "optimizer" in sds[(0, 0)] and sds[(0, 0)]["optimizer"] is not None

    # ---- the full model: global key -> TP parts of param / master / optimizer state
    parts = OrderedDict()       # gkey -> {tp: {"param": t, "master": t, "state": {k: t}}}
    extra = {}                  # gkey -> value (_extra_state and other non-tensors) of TP rank 0
    layer_keys = {}             # global layer -> [suffix key with layer 0] in source order
    pre, post = [], []          # non-layer keys before / after the layers
    for (t, p), sd in sorted(sds.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        chunks = mc.model_chunks(sd)
        if len(chunks) != VP:
            raise SystemExit(f"rank ({t}, {p}): {len(chunks)} model chunks, rank (0, 0) has {VP}")
        gname = {}
        for ci, (_, msd) in enumerate(chunks):
            off = mc.chunk_offset(L, PP, VP, p, ci)
            seen_layer = False
            for k, v in msd.items():
                layer = mc.layer_of(k)
                if layer is not None:
                    if layer >= L // (PP * VP):
                        raise SystemExit(f"rank ({t}, {p}) chunk {ci}: {k} past the even split")
                    g = mc.with_layer(k, layer + off)
                    if t == 0:
                        lk = layer_keys.setdefault(layer + off, [])
                        if mc.with_layer(k, 0) not in lk:
                            lk.append(mc.with_layer(k, 0))
                    seen_layer = True
                else:
                    g = k
                    if t == 0:
                        lst = post if seen_layer or not k.startswith("embedding.") else pre
                        if k not in lst:
                            lst.append(k)
                gname[(ci, k)] = g
                if k.endswith("._extra_state") or not isinstance(v, torch.Tensor):
                    if t == 0:
                        extra[g] = v
                    continue
                slot = parts.setdefault(g, {}).setdefault(t, {})
                if "param" in slot:
                    raise SystemExit(f"{g} appears twice on TP rank {t}")
                slot["param"] = v
        if not with_opt:
            continue
        inner, masters, _ = mc.split_optimizer(sd["optimizer"])
        plist = [(pname, chunks[ci][1][k]) for pname, ci, k in mc.parameter_names(chunks)]
        pkey = {pname: (ci, k) for pname, ci, k in mc.parameter_names(chunks)}
        groups = mc.assign_groups(plist, inner["param_groups"])
        idx = 0
        for gi, (grp, names) in enumerate(zip(inner["param_groups"], groups)):
            if list(grp["params"]) != list(range(idx, idx + len(names))):
                raise SystemExit(f"rank ({t}, {p}): param group {gi} numbers {grp['params'][:4]}..., "
                                 f"expected {len(names)} parameters from {idx}")
            for j, pname in enumerate(names):
                slot = parts[gname[pkey[pname]]][t]
                if idx in inner["state"]:
                    slot["state"] = inner["state"][idx]
                if masters is not None:
                    slot["master"] = masters[gi][j]
                idx += 1
        if len(inner["state"]) and set(inner["state"]) - set(range(idx)):
            raise SystemExit(f"rank ({t}, {p}): optimizer state for unknown parameter indices")

    # the source files now only serve as templates for the other entries: drop their tensors
    for sd in sds.values():
        for name, _ in mc.model_chunks(sd):
            sd[name] = None
        if with_opt:
            inner, masters, wrap = mc.split_optimizer(sd["optimizer"])
            inner["state"] = {}
            if wrap is not None:
                wrap["fp32_from_fp16_params"] = [[] for _ in masters]

    # ---- vocabulary sizes
    rows = parts["embedding.word_embeddings.weight"][0]["param"].shape[0] * TP
    true_vocab = o.true_vocab_size or mc.true_vocab_size(a0)
    div = getattr(a0, "make_vocab_size_divisible_by", 128)
    vp_new = mc.padded_vocab(true_vocab if true_vocab else rows, div, TP2)
    if true_vocab is None and vp_new < rows:
        vp_new = rows
    if true_vocab and vp_new < true_vocab:
        raise SystemExit(f"padded vocabulary {vp_new} < true vocabulary {true_vocab}")

    def resize(x):
        if x.shape[0] == vp_new:
            return x
        if x.shape[0] > vp_new:
            return x[:vp_new]
        pad = torch.zeros((vp_new - x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype)
        return torch.cat([x, pad], dim=0)

    # ---- merge over TP, then cut for the target TP (full tensors dropped as they are cut)
    log(f"reshard_python: TP{TP} PP{PP} VPP{VP} -> TP{TP2} PP{PP2} VPP{VP2}, {len(parts)} tensors, "
        f"vocabulary {rows} -> {vp_new} rows")
    new_parts = {}   # gkey -> {"param": [per new TP rank], "master": [...], "state": {k: [...]}}
    warned = set()
    for g in list(parts):
        per_tp = parts.pop(g)
        if sorted(per_tp) != list(range(TP)):
            raise SystemExit(f"{g}: present on TP ranks {sorted(per_tp)} of {TP}")
        kind = mc.split_kind(g, swiglu)

        def cut(vals, what):
            if kind == "rep":
                if any(not torch.equal(v, vals[0]) for v in vals[1:]) and (g, what) not in warned:
                    log(f"reshard_python: warning: {g} {what} differs between TP ranks; TP rank 0's kept")
                    warned.add((g, what))
                full = vals[0]
            else:
                full = mc.tp_merge(g, kind, vals)
            if kind == "vocab":
                full = resize(full)
            return mc.tp_split(g, kind, full, TP2)

        out = {"param": cut([per_tp[t]["param"] for t in range(TP)], "weight")}
        if "master" in per_tp[0]:
            # Megatron's tensor-parallel attributes of the master copy do not depend on TP
            attrs = mc.state_of(per_tp[0]["master"])
            out["master"] = [mc.with_state(x, attrs) for x in
                             cut([mc.plain(per_tp[t]["master"]) for t in range(TP)], "master")]
        if "state" in per_tp[0]:
            st = OrderedDict()
            for sk, sv in per_tp[0]["state"].items():
                if isinstance(sv, torch.Tensor) and sv.dim() > 0:
                    st[sk] = cut([per_tp[t]["state"][sk] for t in range(TP)], sk)
                else:
                    st[sk] = [copy.deepcopy(sv) for _ in range(TP2)]  # step
            out["state"] = st
        new_parts[g] = out
        del per_tp

    # ---- write the target ranks
    if os.path.exists(o.out) and os.listdir(o.out):
        if not o.force:
            raise SystemExit(f"{o.out} is not empty (--force)")
        shutil.rmtree(o.out)
    os.makedirs(os.path.join(o.out, sub), exist_ok=True)
    lpc = L // (PP2 * VP2)
    for p2 in range(PP2):
        for t2 in range(TP2):
            tmpl = sds[(t2 if t2 < TP else 0, p2 if p2 < PP else 0)]
            chunks = []
            for v2 in range(VP2):
                off = mc.chunk_offset(L, PP2, VP2, p2, v2)
                first, last = p2 == 0 and v2 == 0, p2 == PP2 - 1 and v2 == VP2 - 1
                keys = []
                if first:
                    keys += [(k, k) for k in pre]
                for i in range(lpc):
                    keys += [(mc.with_layer(k, i), mc.with_layer(k, off + i)) for k in layer_keys[off + i]]
                if last:
                    keys += [(k, k) for k in post]
                msd = OrderedDict()
                for k, g in keys:
                    msd[k] = new_parts[g]["param"][t2] if g in new_parts else copy.deepcopy(extra[g])
                chunks.append((f"model{v2}" if VP2 > 1 else "model", msd, keys))
            sd = OrderedDict() if isinstance(tmpl, OrderedDict) else {}
            for k, v in tmpl.items():
                if k == "model" or (k.startswith("model") and k[5:].isdigit()):
                    if k in ("model", "model0"):
                        for name, msd, _ in chunks:
                            sd[name] = msd
                elif k == "args":
                    a = copy.deepcopy(v)
                    a.tensor_model_parallel_size = TP2
                    a.pipeline_model_parallel_size = PP2
                    if hasattr(a, "transformer_pipeline_model_parallel_size"):
                        a.transformer_pipeline_model_parallel_size = PP2
                    a.virtual_pipeline_model_parallel_size = VP2 if VP2 > 1 else None
                    if hasattr(a, "num_layers_per_virtual_pipeline_stage"):
                        a.num_layers_per_virtual_pipeline_stage = lpc if VP2 > 1 else None
                    a.padded_vocab_size = vp_new
                    # Megatron defaults it to TP (validate_args); experts are not resharded here
                    if getattr(a, "num_experts", None) is None and \
                            getattr(a, "expert_tensor_parallel_size", None) == TP:
                        a.expert_tensor_parallel_size = TP2
                    sd[k] = a
                elif k == "optimizer":
                    if with_opt:
                        sd[k] = build_optimizer(v, chunks, new_parts, t2)
                elif k == "opt_param_scheduler":
                    if with_opt:
                        sd[k] = copy.deepcopy(v)
                else:
                    sd[k] = copy.deepcopy(v)
            d = os.path.join(o.out, sub, mc.rank_dir(t2, p2, PP2))
            os.makedirs(d, exist_ok=True)
            mc.save(sd, os.path.join(d, "model_optim_rng.pt"))
            log(f"reshard_python: wrote {os.path.relpath(d, o.out)}")
        # this stage's tensors are written
        for _, _, keys in chunks:
            for _, g in keys:
                new_parts.pop(g, None)
    with open(os.path.join(o.out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(tracker)


def build_optimizer(tmpl_opt, chunks, new_parts, t2):
    """The template rank's optimizer dict with this rank's parameters, in Megatron's order."""
    inner_t, masters_t, wrap_t = mc.split_optimizer(tmpl_opt)
    named = [(name, msd) for name, msd, _ in chunks]
    gkeys = [{k: g for k, g in keys} for _, _, keys in chunks]
    plist, gof = [], {}
    for pname, ci, k in mc.parameter_names(named):
        plist.append((pname, named[ci][1][k]))
        gof[pname] = gkeys[ci][k]
    groups = mc.assign_groups(plist, inner_t["param_groups"])
    new_groups, state, masters = [], {}, []
    idx = 0
    for grp, names in zip(inner_t["param_groups"], groups):
        ng = OrderedDict() if isinstance(grp, OrderedDict) else {}
        for k, v in grp.items():
            ng[k] = list(range(idx, idx + len(names))) if k == "params" else copy.deepcopy(v)
        new_groups.append(ng)
        mg = []
        for pname in names:
            np_ = new_parts[gof[pname]]
            if "state" in np_:
                state[idx] = {sk: sv[t2] for sk, sv in np_["state"].items()}
            if masters_t is not None:
                mg.append(np_["master"][t2])
            idx += 1
        masters.append(mg)
    inner = {}
    for k, v in inner_t.items():
        inner[k] = state if k == "state" else new_groups if k == "param_groups" else copy.deepcopy(v)
    if wrap_t is None:
        return inner
    wrap = {}
    for k, v in wrap_t.items():
        wrap[k] = inner if k == "optimizer" else masters if k == "fp32_from_fp16_params" else copy.deepcopy(v)
    return wrap


if __name__ == "__main__":
    main()
