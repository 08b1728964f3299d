#!/usr/bin/env python3
"""Distributed-optimizer fixtures written by megatron-core versions other than 0.16.1.

Driver: testdata/gen/run_megatron_distopt_versions.sh (read it and
README_megatron_distopt_versions.md first). This file runs the generator of the 0.16.1 fixtures,
gen_megatron_distopt.py, unchanged (its model, data, training steps, layout dump and master hash)
under another megatron-core; it only adds what differs between versions:

- `compat()`: adapters for the few training-code interfaces the generator calls that are not the
  same in every version (see VERSION NOTES below); it changes argument plumbing only, never the
  math, the model or what is saved;
- the list of optimizer forms a version's `save_checkpoint` can write, and how each is selected
  (`FORMS`, `select_form`).

    gen_megatron_distopt_versions.py train --tag TAG --config NAME    # under torchrun, cwd WORK
    gen_megatron_distopt_versions.py describe --tag TAG --config NAME WORK OUT
                                              # OUT/TAG_NAME/expected.json (the committed forms)
    gen_megatron_distopt_versions.py check --tag TAG --config NAME WORK
                                              # is WORK/NAME/fully_reshardable right (PR #5077)?
    gen_megatron_distopt_versions.py oracle-plan|oracle --tag TAG --config NAME WORK [OUT]
    gen_megatron_distopt_versions.py reshard --tag TAG --config NAME --source DIR --target LAYOUT \
        --out DIR                             # under torchrun: this version's own reshard
    gen_megatron_distopt_versions.py keep --tag TAG --config NAME     # the forms committed

VERSION NOTES (what compat() adapts, by the megatron-core version found at run time)
- < 0.14 (0.13.1): the tag has no gpt_builders.py / model_provider.py; pretrain_gpt.py's
  model_provider(pre_process, post_process, vp_stage) is the same builder without the
  builder argument, so `gpt_builders` / `model_provider` modules are provided that call it.
  training.train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler,
  config) gets the forward-backward function itself and returns 7 values (0.16 adds
  log_max_attention_logit as an eighth). DistributedOptimizer has no
  _init_optimizer_states_with_dummy_values (gen_megatron_distopt.init_states_for_dist_load, for
  the oracle's load): the 0.16.1 method's body is added.
- >= 0.17: --enable-gloo-process-groups / --disable-gloo-process-groups set
  args.use_gloo_process_groups (0.16: args.enable_gloo_process_groups), which
  gen_megatron.init_megatron passes to initialize_model_parallel; the old name is set from the
  new one after parse_args and removed again once init_megatron has used it (it is not in the
  saved args).
- >= 0.19: training.setup_model_and_optimizer takes (model_type, model_provider_func, ...)
  (up to 0.18: (model_provider_func, model_type, ...)); unwrap_model is
  megatron.core.utils.unwrap_model only (0.16: also exported by megatron.training.utils).
"""

import argparse
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_megatron_distopt as gd  # noqa: E402

# Forms each version's save_checkpoint writes with the distributed optimizer, and how it is asked:
# (ckpt_format, args attributes). megatron/training/checkpointing.py
# _build_sharded_state_dict_metadata picks distrib_optim_sharding_type from these arguments.
FORMS = {
    # 0.13.1: fully_sharded_model_space by default (args.ckpt_fully_parallel_save, on unless
    # --no-ckpt-fully-parallel-save), dp_zero_gather_scatter with --no-ckpt-fully-parallel-save.
    # fully_sharded_bucket_space is not reachable from the command line, and with torch's Adam
    # (no Apex/TE on the CPU) its per-parameter 0-dim 'step' fails the bucket-space shape assert.
    "0.13": {
        "legacy": ("torch", {}),
        "fully_sharded_model_space": ("torch_dist", {"ckpt_fully_parallel_save": True}),
        "dp_zero_gather_scatter": ("torch_dist", {"ckpt_fully_parallel_save": False}),
    },
    # 0.19: dp_reshardable by default, fully_reshardable with --dist-ckpt-optim-fully-reshardable
    # (the same choice as 0.16.1).
    "0.19": {
        "legacy": ("torch", {}),
        "dp_reshardable": ("torch_dist", {"dist_ckpt_optim_fully_reshardable": False}),
        "fully_reshardable": ("torch_dist", {"dist_ckpt_optim_fully_reshardable": True}),
    },
}

# Forms committed under testdata/megatron/distopt/<tag>_<config>/ (the testdata budget); every form
# of FORMS is written to the work directory and checked. 0.19's fully_reshardable is left out:
# its keys are those of the 0.16.1 fixtures' fully_reshardable, its common state is 0.19's
# common_state object that dp_reshardable shows as well, and the oracle loads it from WORK.
KEEP = {
    "0.13": ("legacy", "fully_sharded_model_space", "dp_zero_gather_scatter"),
    "0.19": ("legacy", "dp_reshardable"),
}
# the form Megatron loads to change TP/PP (its reshard, the oracle)
RESHARDABLE = {"0.13": "fully_sharded_model_space", "0.19": "fully_reshardable"}

# fixture name prefix -> megatron-core minor series the run must find, and the Megatron-LM tag
TAGS = {"core013": "0.13", "core019": "0.19"}
TRAINING_TAG = {"0.13": "core_v0.13.1", "0.19": "core_v0.19.0"}


def mcore_version():
    import megatron.core
    return tuple(int(x) for x in megatron.core.__version__.split(".")[:2])


def compat():
    """Adapters for interfaces that differ from 0.16.1 (see VERSION NOTES)."""
    v = mcore_version()
    if v < (0, 14):
        import pretrain_gpt
        from megatron.training import training

        def gpt_builder(args, pre_process, post_process, vp_stage=None, config=None,
                        pg_collection=None):
            raise AssertionError("model_provider calls pretrain_gpt.model_provider directly")

        def model_provider(model_builder, pre_process=True, post_process=True, vp_stage=None):
            return pretrain_gpt.model_provider(pre_process, post_process, vp_stage)

        sys.modules["gpt_builders"] = types.SimpleNamespace(gpt_builder=gpt_builder)
        sys.modules["model_provider"] = types.SimpleNamespace(model_provider=model_provider)

        train_step = training.train_step

        def train_step_016(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler,
                           config, forward_backward_func, iteration=None):
            out = train_step(forward_step_func, data_iterator, model, optimizer,
                             opt_param_scheduler, config)
            return (*out, 0)

        training.train_step = train_step_016

        from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

        if not hasattr(DistributedOptimizer, "_init_optimizer_states_with_dummy_values"):
            DistributedOptimizer._init_optimizer_states_with_dummy_values = \
                _init_optimizer_states_with_dummy_values
    if v >= (0, 17):
        from megatron.training import arguments

        parse_args = arguments.parse_args

        def parse_args_016(*a, **k):
            args = parse_args(*a, **k)
            args.enable_gloo_process_groups = args.use_gloo_process_groups
            return args

        arguments.parse_args = parse_args_016

        import gen_megatron

        init_megatron = gen_megatron.init_megatron

        def init_megatron_without_alias():
            # the alias must not reach the saved args
            args = init_megatron()
            del args.enable_gloo_process_groups
            return args

        gen_megatron.init_megatron = init_megatron_without_alias
    if v >= (0, 19):
        from megatron.training import training

        setup_model_and_optimizer = training.setup_model_and_optimizer

        def setup_model_and_optimizer_016(model_provider_func, model_type, *a, **k):
            return setup_model_and_optimizer(model_type, model_provider_func, *a, **k)

        training.setup_model_and_optimizer = setup_model_and_optimizer_016

        from megatron.core import utils as core_utils
        from megatron.training import utils as training_utils

        if not hasattr(training_utils, "unwrap_model"):
            training_utils.unwrap_model = core_utils.unwrap_model


def _init_optimizer_states_with_dummy_values(self):
    """What megatron-core 0.16.1's DistributedOptimizer method of this name does (one step on
    zero gradients, so that a fresh torch Adam has its per-parameter states before a
    dist_checkpointing load overwrites them); 0.13.1 lacks it (gen_megatron_distopt.
    init_states_for_dist_load calls it)."""
    import torch
    for group in self.optimizer.param_groups:
        for param in group["params"]:
            if param.numel():
                param.grad = torch.zeros_like(param)
    self.optimizer.step()
    self.optimizer.zero_grad()


def select_form(args, series, form):
    """Set Megatron's arguments so that save_checkpoint writes `form` (see FORMS)."""
    from megatron.training.utils import update_use_dist_ckpt

    fmt, attrs = FORMS[series][form]
    args.ckpt_format = fmt
    for k, val in attrs.items():
        assert hasattr(args, k), f"megatron-core {series}: no args.{k}"
        setattr(args, k, val)
    update_use_dist_ckpt(args)


def start(tag):
    """CPU shims, the version check and compat(); returns the version series."""
    import megatron.core

    import gen_megatron_cpu as shim
    shim.install()
    series = TAGS[tag]
    have = ".".join(megatron.core.__version__.split(".")[:2])
    assert have == series, f"{tag} wants megatron-core {series}.x, found {megatron.core.__version__}"
    compat()
    return series


def cmd_train(opts):
    """gen_megatron_distopt.cmd_train with this version's forms: WORK/CONFIG/<form>/ and
    WORK/CONFIG.layout.rankR.json (the names gen_megatron_distopt.py describe reads)."""
    import megatron.core
    import torch
    import torch.distributed as dist

    name = opts.config
    series = start(opts.tag)
    c = gd.layout_of(gd.CONFIGS[name])
    args, model, optimizer, sched = gd.setup(c, name)
    assert args.data_parallel_size == c["dp"], (args.data_parallel_size, c)
    losses = gd.train_steps(args, model, optimizer, sched, gd.ITERS, 0)
    meta = gd.dump_layout(model, optimizer)
    meta["losses"] = losses
    meta["master_sha256"] = gd.master_hash(optimizer)
    meta["argv"] = sys.argv[1:]
    meta["versions"] = {"megatron_core": megatron.core.__version__, "torch": torch.__version__}

    from megatron.training.checkpointing import save_checkpoint
    from megatron.training.training import num_floating_point_operations

    flops = args.iteration * num_floating_point_operations(args, args.global_batch_size)
    for form in FORMS[series]:
        args.save = os.path.join(name, form)
        select_form(args, series, form)
        save_checkpoint(args.iteration, model, optimizer, sched, flops)
    meta["num_floating_point_operations_so_far"] = flops
    with open(f"{name}.layout.rank{meta['rank']}.json", "w") as f:
        json.dump(meta, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------
# describe: gen_megatron_distopt.py describe, run under this version


def iter_dir(root):
    it = open(os.path.join(root, "latest_checkpointed_iteration.txt")).read().strip()
    return os.path.join(root, f"iter_{int(it):07d}")


def load_dcp(d, keys=None):
    """{key: tensor or unpickled object} of a torch_dist directory, read by one process."""
    import io

    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    reader = FileSystemReader(d)
    md = reader.read_metadata()
    sd = {}
    for k, m in md.state_dict_metadata.items():
        if keys is not None and not keys(k):
            continue
        sd[k] = torch.zeros(tuple(m.size), dtype=m.properties.dtype) \
            if isinstance(m, TensorStorageMetadata) else io.BytesIO()
    dcp.load(sd, storage_reader=reader, no_dist=True)
    for k, v in sd.items():
        if isinstance(v, io.BytesIO):
            v.seek(0)
            sd[k] = torch.load(v, weights_only=False)
    return sd


def describe_torch_dist_any(root, orig):
    """gen_megatron_distopt.describe_torch_dist for a directory without common.pt: from 0.19 on
    dist_checkpointing.save stores the common state dict as the ShardedObject 'common_state'
    (item common_state/shard_0_1, a torch.save of [dict]; not in 0.18.2) inside the checkpoint, and
    metadata.json names no common backend. It is recorded under "common_state" instead of
    "common.pt"."""
    import torch

    d = iter_dir(root)
    path = os.path.join(d, "common.pt")
    if os.path.exists(path):
        return orig(root)
    objs = load_dcp(d, lambda k: k.startswith("common_state/"))
    (key, value), = objs.items()
    (common,) = value
    real = torch.load

    def load(f, *a, **k):
        return common if isinstance(f, str) and f == path else real(f, *a, **k)

    torch.load = load
    try:
        out = orig(root)
    finally:
        torch.load = real
    out["common_state"] = dict(out.pop("common.pt"), stored_as=(
        f"{key}: BytesStorageMetadata item, torch.save of a one-element list [common state dict]"))
    out["objects"][key] = "the common state dict, see common_state"
    return out


def check_fully_reshardable(root):
    """A fp32 model's master weights are its weights: in a fully_reshardable save every
    optimizer.state.param.<key> must equal the model tensor <key>. Megatron-LM PR #5077's defect
    (parameters after a padded bucket sliced at padded offsets of the unpadded gathered buffer)
    breaks exactly that."""
    import torch

    sd = load_dcp(iter_dir(root), lambda k: "/" not in k)
    prefix = "optimizer.state.param."
    res = {"equal": [], "differ": {}}
    for k in sorted(sd):
        if not k.startswith(prefix):
            continue
        w, m = sd[k[len(prefix):]], sd[k]
        if torch.equal(w, m):
            res["equal"].append(k[len(prefix):])
        else:
            res["differ"][k[len(prefix):]] = float((w.double() - m.double()).abs().max())
    return res


def model_space_globals(d):
    """{optimizer.state.{param,exp_avg,exp_avg_sq}.<key>: global tensor} of a 0.13
    fully_sharded_model_space save, undoing megatron-core's N-D flattened reformulation
    (strategies/torch.py sharded_tensor_to_torch_sharded_tensor): the item
    optimizer.state.<state>.<key> has the shape axis_fragmentations + (local numel,), and its
    block [i0, .., in-1, :] is the local shard at fragment (i0, .., in-1), flattened in C order;
    .metadata's mcore_data[<item>]['nd_reformulated_orig_global_shape'] is the global shape."""
    import itertools
    import pickle

    import torch

    md = pickle.load(open(os.path.join(d, ".metadata"), "rb"))
    sd = load_dcp(d, lambda k: k.startswith("optimizer.state."))
    out = {}
    for k, t in sd.items():
        shape = tuple(md.mcore_data[k]["nd_reformulated_orig_global_shape"])
        frag = tuple(t.shape[:-1])
        local = tuple(g // f for g, f in zip(shape, frag))
        full = torch.empty(shape, dtype=t.dtype)
        for idx in itertools.product(*map(range, frag)):
            full[tuple(slice(i * n, (i + 1) * n) for i, n in zip(idx, local))] = t[idx].reshape(local)
        state, key = k[len("optimizer.state."):].split(".", 1)
        out[f"optimizer.state.{'param' if state == 'fp32_param' else state}.{key}"] = full
    return out


def check_model_space_vs_legacy(src, ranks, c):
    """gen_megatron_distopt.check_fully_vs_legacy for 0.13's fully_sharded_model_space: every
    parameter's master and moments from the reformulated items (model_space_globals) against
    the legacy distrib_optim.pt read with the dumped layout."""
    import torch

    import distopt_hashes as dh
    import gen_megatron

    sd = model_space_globals(iter_dir(os.path.join(src, "fully_sharded_model_space")))
    bad, checked = {}, 0
    for r in ranks:
        if r["dp"] != 0:
            continue
        sub = f"mp_rank_{r['tp']:02d}" + (f"_{r['pp']:03d}" if c["pp"] > 1 else "")
        legacy = dh.load(os.path.join(src, "legacy", f"iter_{gd.ITERS:07d}", sub,
                                      "distrib_optim.pt"))
        for b in r["buffers"]:
            world = next(iter(legacy[b["gbuf_index"]].values()))
            shift, lead = {}, 0
            for k in b["buckets"]:
                shift[k["index"]] = k["start"] - lead
                lead += k["numel_unpadded"]
            for p in b["params"]:
                key, layer = gd.dist_key(p["global_name"])
                for st in ("param", "exp_avg", "exp_avg_sq"):
                    full = sd[f"optimizer.state.{st}.{key}"]
                    full = full[layer] if layer is not None else full
                    want = gen_megatron.tp_slice(p["name"], full, c["tp"], r["tp"], True).reshape(-1)
                    lo = p["start"] - shift[p["bucket"]]
                    checked += 1
                    if not torch.equal(world[st][lo:lo + want.numel()], want):
                        bad.setdefault(st, []).append(f"tp{r['tp']} {p['global_name']}")
    return {"compared": checked, "differ": bad}


def cmd_describe(opts):
    """OUT/<tag>_CONFIG/expected.json by gen_megatron_distopt.py describe (same record), for the
    committed forms, plus what this version adds: the forms written and how each was selected
    and, for 0.13, the fully_sharded_model_space check."""
    import megatron.core

    import distopt_hashes as dh
    import gen_common

    series = TAGS[opts.tag]
    gd.FORMS = KEEP[series]
    if "fully_reshardable" not in FORMS[series]:
        gd.check_fully_vs_legacy = lambda src, ranks, c: {
            "compared": 0, "note": f"megatron-core {series} writes no fully_reshardable form; "
                                   "see fully_sharded_model_space_vs_legacy"}
    orig_describe = gd.describe_torch_dist
    gd.describe_torch_dist = lambda root: describe_torch_dist_any(root, orig_describe)
    orig_versions = gen_common.versions
    gen_common.versions = lambda **kw: orig_versions(
        **dict(kw, megatron_lm_training=f"NVIDIA/Megatron-LM tag {TRAINING_TAG[series]}"))
    gd.cmd_describe(argparse.Namespace(work=opts.work, out=opts.out, names=[opts.config],
                                       tag=opts.tag + "_"))
    path = os.path.join(opts.out, f"{opts.tag}_{opts.config}", "expected.json")
    rec = json.load(open(path))
    rec["megatron_core_version"] = megatron.core.__version__
    rec["forms_written"] = {f: {"ckpt_format": fmt, "megatron_args": attrs,
                                "committed": f in KEEP[series]}
                            for f, (fmt, attrs) in FORMS[series].items()}
    rec["forms_note"] = ("every form is one save_checkpoint of the same state; the forms not "
                         "committed (testdata budget) are regenerated by "
                         "run_megatron_distopt_versions.sh")
    if "fully_sharded_model_space" in FORMS[series]:
        c = gd.layout_of(gd.CONFIGS[opts.config])
        rec["fully_sharded_model_space_vs_legacy"] = check_model_space_vs_legacy(
            os.path.join(opts.work, opts.config), rec["ranks"], c)
    with open(path, "w") as f:
        f.write(dh.dumps(rec) + "\n")


def check_defect_mechanism(work, config):
    """Every saved optimizer.state.<k>.<key> of the fully_reshardable form, TP-sliced for a TP
    rank, against the legacy distrib_optim.pt of that rank (the gathered buffer W with the
    bucket-end padding removed) at the parameter's range in the PADDED buffer, W[start:end]
    zero-filled past W's end: what sharded_param_state_fully_reshardable slices. Returns
    {"params": n, "as_padded_slice": n1, "as_unpadded_range": n2, "lost_elements": {...}}.
    A replicated parameter (norm weights) is written once, from TP rank 0, so only TP rank 0's
    copy is compared."""
    import torch

    import distopt_hashes as dh
    import gen_megatron as gm
    c = gd.layout_of(gd.CONFIGS[config])
    sd = load_dcp(iter_dir(os.path.join(work, config, "fully_reshardable")), lambda k: "/" not in k)
    res = {"params": 0, "as_padded_slice": 0, "as_unpadded_range": 0, "lost_elements": {}}
    for r in range(c["tp"] * c["pp"] * c["dp"]):
        lay = json.load(open(os.path.join(work, f"{config}.layout.rank{r}.json")))
        if lay["dp"] != 0 or lay["pp"] != 0:
            continue
        legacy = dh.load(os.path.join(work, config, "legacy", f"iter_{gd.ITERS:07d}",
                                      f"mp_rank_{lay['tp']:02d}", "distrib_optim.pt"))
        for gi, buf in enumerate(lay["buffers"]):
            (world,) = legacy[gi].values()
            unpadded_start, pad_before = [], 0
            for b in buf["buckets"]:
                unpadded_start.append(b["start"] - pad_before)
                pad_before += (b["end"] - b["start"]) - b["numel_unpadded"]
            covered = torch.zeros(buf["numel_unpadded"], dtype=torch.bool)
            for p in buf["params"]:
                covered[p["start"]:p["end"]] = True
            for p in buf["params"]:
                n = p["end"] - p["start"]
                b = buf["buckets"][p["bucket"]]
                u = unpadded_start[p["bucket"]] + p["start"] - b["start"]
                key, layer = gd.dist_key(p["global_name"])
                if lay["tp"] and gm.split_kind(p["name"]) == "rep":
                    # written once, by its main replica (TP rank 0): TP rank 0's buffer
                    continue
                res["params"] += 1
                hits = {"padded": True, "unpadded": True}
                for k in ("param", "exp_avg", "exp_avg_sq"):
                    full = sd[f"optimizer.state.{k}.{key}"]
                    if layer is not None:
                        full = full[layer]
                    saved = gm.tp_slice(p["name"], full, c["tp"], lay["tp"], True).reshape(-1)
                    w = world[k]
                    padded = torch.nn.functional.pad(w[p["start"]:p["end"]],
                                                     (0, max(0, p["end"] - w.numel())))
                    hits["padded"] &= torch.equal(saved, padded)
                    hits["unpadded"] &= torch.equal(saved, w[u:u + n])
                res["as_padded_slice"] += hits["padded"]
                res["as_unpadded_range"] += hits["unpadded"]
                lost = int((~covered[u:u + n]).sum())
                if lost:
                    res["lost_elements"][f"tp{lay['tp']}:{p['name']}"] = lost
    return res


def cmd_check(opts):
    """Print the fully_reshardable checks of WORK/CONFIG/fully_reshardable (any config)."""
    chk = check_fully_reshardable(os.path.join(opts.work, opts.config, "fully_reshardable"))
    print(f"{opts.config}/fully_reshardable: {len(chk['equal'])} optimizer.state.param.<key> equal "
          f"to the weights, {len(chk['differ'])} differ")
    for k, d in chk["differ"].items():
        print(f"    {k}: max |diff| {d:.3g}")
    m = check_defect_mechanism(opts.work, opts.config)
    print(f"per TP-rank parameter (param, exp_avg, exp_avg_sq): {m['params']} parameters, "
          f"{m['as_padded_slice']} saved as W[padded start:end] (the slicing of "
          f"sharded_param_state_fully_reshardable), {m['as_unpadded_range']} as their own range "
          f"of W; elements of a parameter's own range that no saved slice holds: "
          f"{m['lost_elements'] or 'none'}")
    assert m["as_padded_slice"] == m["params"]


# ----------------------------------------------------------------------------------------------
# the oracle: this version's own reshard of its fixture


def oracle_targets(config, series):
    """The targets gen_megatron_distopt.ORACLE gives this source config that the version can
    build: megatron-core 0.13 refuses fewer query groups than TP ranks
    (TransformerConfig.__post_init__: "num_query_groups (2) must be a multiple of
    tensor_model_parallel_size (4)"; 0.16.1 accepts it), so no TP 4 target there."""
    groups = int(gd.MODEL[gd.MODEL.index("--num-query-groups") + 1])
    src = gd.layout_of(gd.CONFIGS[config])
    out = []
    for s, t in gd.ORACLE:
        if s != config:
            continue
        if series == "0.13" and gd.target_layout(src["family"], t)["tp"] > groups:
            continue
        out.append(t)
    return out


def cmd_oracle_plan(opts):
    """Lines 'OUT NPROC SOURCE TARGET' for the driver (paths relative to WORK)."""
    series = TAGS[opts.tag]
    src = gd.layout_of(gd.CONFIGS[opts.config])
    for target in oracle_targets(opts.config, series):
        c = gd.target_layout(src["family"], target)
        out = os.path.join("oracle", gd.oracle_dir(opts.config, target))
        print(out, c["tp"] * c["pp"] * c["dp"],
              os.path.join(opts.config, RESHARDABLE[series]), target)


def cmd_reshard(opts):
    """gen_megatron_distopt.cmd_reshard in this version: build at the target layout,
    load_checkpoint of the source's reshardable torch_dist save, save legacy."""
    import torch.distributed as dist

    series = start(opts.tag)
    src = gd.layout_of(gd.CONFIGS[opts.config])
    c = gd.target_layout(src["family"], opts.target)
    args, model, optimizer, sched = gd.setup(c, opts.out, ["--ckpt-format", "torch_dist",
                                                           "--load", opts.source, "--no-load-rng"])
    from megatron.training.checkpointing import load_checkpoint, save_checkpoint

    gd.init_states_for_dist_load(optimizer)
    gd.install_fully_reshardable_step_fix()
    it, flops = load_checkpoint(model, optimizer, sched)
    assert it == gd.ITERS, it
    args.iteration = it
    select_form(args, series, "legacy")
    save_checkpoint(it, model, optimizer, sched, flops)
    meta = gd.dump_layout(model, optimizer)
    meta["master_sha256"] = gd.master_hash(optimizer)
    meta["argv"] = sys.argv[1:]
    with open(f"{opts.out}.layout.rank{meta['rank']}.json", "w") as f:
        json.dump(meta, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def cmd_oracle(opts):
    """OUT/oracle_versions.json: this version's pairs (replacing earlier ones of the same tag),
    in the scheme of gen_megatron_distopt.py oracle (oracle.json)."""
    import megatron.core
    import torch

    import distopt_hashes as dh
    import gen_common

    series = TAGS[opts.tag]
    versions = gen_common.versions(torch=torch.__version__, megatron_core=megatron.core.__version__,
                                   megatron_lm_training=f"NVIDIA/Megatron-LM tag {TRAINING_TAG[series]}")
    ref = {}
    ref_path = os.path.join(opts.out, "oracle.json")
    if os.path.exists(ref_path):
        for p in json.load(open(ref_path))["pairs"]:
            ref[(p["source"].split("/")[2], p["target"])] = p
    pairs = []
    src = gd.layout_of(gd.CONFIGS[opts.config])
    for target in oracle_targets(opts.config, series):
        d = os.path.join(opts.work, "oracle", gd.oracle_dir(opts.config, target))
        c = gd.target_layout(src["family"], target)
        ranks = []
        while os.path.exists(f"{d}.layout.rank{len(ranks)}.json"):
            ranks.append(json.load(open(f"{d}.layout.rank{len(ranks)}.json")))
        rec = {"source": f"megatron/distopt/{opts.tag}_{opts.config}",
               "source_form_loaded": RESHARDABLE[series],
               "tag": opts.tag, "versions": versions, "target": target,
               "target_layout": {k: c[k] for k in ("tp", "pp", "dp", "layers", "bf16", "tied")},
               "target_vpp": c["layers"] // (c["pp"] * c["vpl"]) if c["vpl"] else None,
               "target_ddp_bucket_size": c["bucket"],
               "megatron_argv": ranks[0]["argv"],
               "master_sha256_per_rank": [x["master_sha256"] for x in ranks]}
        if target == opts.config:
            rec["equals_source_legacy"] = gd.same_tensors(d + "/.", os.path.join(opts.work, opts.config,
                                                                             "legacy"))
        rec.update(dh.describe_dir(d))
        # the resharded optimizer state merged to full tensors against the source's legacy save
        # merged the same way (gen_megatron_distopt.py oracle's check)
        src_ranks = []
        while os.path.exists(os.path.join(opts.work, f"{opts.config}.layout.rank{len(src_ranks)}.json")):
            src_ranks.append(json.load(open(os.path.join(
                opts.work, f"{opts.config}.layout.rank{len(src_ranks)}.json"))))
        fa = gd.full_states(d, ranks, c)
        fb = gd.full_states(os.path.join(opts.work, opts.config, "legacy"), src_ranks, src)
        both = sorted(set(fa) & set(fb))
        rec["full_state_vs_source_legacy"] = {
            "compared": len(both),
            "only_in_target": sorted(set(fa) - set(fb)), "only_in_source": sorted(set(fb) - set(fa)),
            "differ": [f"{n}/{st}" for n in both for st in ("param", "exp_avg", "exp_avg_sq")
                       if not torch.equal(fa[n][st], fb[n][st])]}
        r = ref.get((opts.config, target))
        if r is not None:
            rec["tensors_equal_oracle_json_pair"] = (
                {f: v["tensors"] for f, v in rec["files"].items()}
                == {f: v["tensors"] for f, v in r["files"].items()})
        pairs.append(rec)
    path = os.path.join(opts.out, "oracle_versions.json")
    old = json.load(open(path))["pairs"] if os.path.exists(path) else []
    pairs = [p for p in old if p["tag"] != opts.tag] + pairs
    out = {
        "producer": "Megatron's own reshard in the version that wrote the source: megatron-core "
                    "builds the model and the distributed optimizer at the target layout, "
                    "load_checkpoint (dist_checkpointing) of the source's reshardable save "
                    "(source_form_loaded), save_checkpoint --ckpt-format torch",
        "schema": "as oracle.json (README_megatron_distopt.md), plus per pair: tag, versions, "
                  "source_form_loaded, tensors_equal_oracle_json_pair (every tensor of every file "
                  "equal to oracle.json's pair of the same source config and target)",
        "note": "every committed form of a source directory holds the same state (one "
                "save_checkpoint each from the same training run)",
        "pairs": sorted(pairs, key=lambda p: (p["tag"], p["target"])),
    }
    with open(path, "w") as f:
        f.write(dh.dumps(out) + "\n")
    print(f"oracle_versions.json: {len(pairs)} pairs")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("train", "reshard", "describe", "check", "oracle-plan", "oracle", "keep"):
        p = sub.add_parser(name)
        p.add_argument("--tag", required=True, choices=sorted(TAGS))
        p.add_argument("--config", required=True, choices=sorted(gd.CONFIGS))
        if name == "reshard":
            p.add_argument("--source", required=True)
            p.add_argument("--target", required=True)
            p.add_argument("--out", required=True)
        if name in ("describe", "oracle", "check"):
            p.add_argument("work")
        if name in ("describe", "oracle"):
            p.add_argument("out")
    opts = ap.parse_args()
    if opts.cmd == "keep":
        print(" ".join(KEEP[TAGS[opts.tag]]))
        return
    {"train": cmd_train, "reshard": cmd_reshard, "describe": cmd_describe, "check": cmd_check,
     "oracle-plan": cmd_oracle_plan, "oracle": cmd_oracle}[opts.cmd](opts)


if __name__ == "__main__":
    main()
