"""Synthetic DeepSpeed ZeRO-2 / ZeRO-3 checkpoints for tests/bench/zero_to_fp32.sh.

Needs torch >= 2.2 (torch.load mmap=True) with deepspeed importable: the template files
pickle DeepSpeed classes (loss scaler, ZeroStageEnum, fragment_address). The header of
zero_to_fp32.sh says how to make that environment.

  make_zero_bench.py make --stage {2,3} --out DIR [--model llama|tiny] [--world-size W]
  make_zero_bench.py selftest [--keep DIR]
  make_zero_bench.py check-values --model M OUTPUT_DIR
  make_zero_bench.py compare OUTPUT_DIR_A OUTPUT_DIR_B

make: writes DIR/latest and DIR/global_step100/ in DeepSpeed 0.19.8's on-disk format. The
dicts are those of a real checkpoint that DeepSpeed wrote (testdata/zero/stage2_fp32_ws2 for
stage 2, testdata/zero/stage3_fp32_ws4 for stage 3; testdata/gen/README_zero.md), loaded and
saved again with torch.save after replacing every model-dependent entry: the module state
dict, buffer_names, param_shapes, frozen parameter entries (none), shared_params, the flat
fp32 master partitions, the Adam moments, paddings, partition counts and slice mappings,
recomputed for the new model and world size (layout rules: ../shared/formats/zero.md
sections 5 and 6):
  stage 2: per param group, the parameters are concatenated and zero-padded to a multiple
    of 2*W; rank r holds elements [r*P, r*P+P), P = padded/W, saved as a view of its first
    clamp(N - r*P, 0, P) elements (storage of P elements); moments of P elements; the model
    states' module params are views into one padded flat buffer per group, as DeepSpeed's are.
  stage 3: each parameter of n elements is cut into W slices of q = ceil(n/W) (the last one
    zero-padded); rank r's fp32_flat_groups[k] concatenates its slices of sub-group k
    (sub-groups as DeepSpeed forms them from sub_group_size, default 1e9); module params are
    empty placeholders, every rank has a model-states file.
Model "llama": LLaMA-7B widths (hidden 4096, ffn 11008, vocab 32000), 3 decoder layers, final
norm, lm_head tied to the embedding (shared_params), a persistent fp32 rotary buffer: 738M
fp32 parameters, 2.95 GB of master weights. Two optimizer param groups (2-D weights, norms).
Model "tiny": odd sizes (hidden 13) so that every padding rule is exercised.
Parameter values are a pure function of the parameter's index (check-values regenerates them).

selftest: recomputes the layout metadata of every stage 1/2/3 fixture in testdata/zero from
its shapes with the rules above and compares it with what DeepSpeed wrote; writes tiny
stage-2 and stage-3 checkpoints, compares their structure (keys, types, DeepSpeed classes)
with the templates, runs DeepSpeed's own zero_to_fp32 on them and checks every value.

check-values: every tensor of a consolidated output (e.g. from DeepSpeed's zero_to_fp32)
equals the values make wrote, bit for bit, and the tied lm_head shares the embedding.
compare: two consolidated outputs hold the same tensors: names and order, dtypes, shapes,
bytes and aliases.
"""

import argparse
import collections
import copy
import glob
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "testdata", "zero")
TEMPLATES = {2: "stage2_fp32_ws2", 3: "stage3_fp32_ws4"}
SEED = 20240
STEPS = 100
MICRO_BATCH = 2
DEFAULT_SUB_GROUP_SIZE = 1000000000
MODELS = {"llama": (4096, 11008, 32000, 3), "tiny": (13, 23, 37, 2)}

Param = collections.namedtuple("Param", "index name shape group")


def natural_keys(text):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def numel(shape):
    return math.prod(shape)


def load(path, mmap=False):
    return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)


# --------------------------------------------------------------------------------------
# model


class Model:
    """Parameters in named_parameters order, the tied alias, buffers, state_dict order."""

    def __init__(self, kind):
        hidden, ffn, vocab, layers = MODELS[kind]
        shapes = [("model.embed_tokens.weight", (vocab, hidden))]
        for i in range(layers):
            p = f"model.layers.{i}."
            for n in ("q", "k", "v", "o"):
                shapes.append((p + f"self_attn.{n}_proj.weight", (hidden, hidden)))
            shapes.append((p + "mlp.gate_proj.weight", (ffn, hidden)))
            shapes.append((p + "mlp.up_proj.weight", (ffn, hidden)))
            shapes.append((p + "mlp.down_proj.weight", (hidden, ffn)))
            shapes.append((p + "input_layernorm.weight", (hidden,)))
            shapes.append((p + "post_attention_layernorm.weight", (hidden,)))
        shapes.append(("model.norm.weight", (hidden,)))
        self.params = [Param(i, n, s, 0 if len(s) == 2 else 1) for i, (n, s) in enumerate(shapes)]
        self.groups = [[p for p in self.params if p.group == g] for g in (0, 1)]
        self.alias = ("lm_head.weight", "model.embed_tokens.weight")
        rot = max(hidden // 64, 1)
        self.buffers = collections.OrderedDict(
            [("model.rotary_emb.inv_freq",
              (1.0 / 10000 ** (torch.arange(0, rot, dtype=torch.float64) / rot)).float())])
        # HF LlamaForCausalLM order: model.* (params, then the rotary buffer), then lm_head
        self.state_dict_order = ([("param", p.name) for p in self.params]
                                 + [("buffer", n) for n in self.buffers]
                                 + [("alias", self.alias[0])])

    def param(self, name):
        return next(p for p in self.params if p.name == name)


def fill_param(p, out):
    """Writes parameter p's values into the 1-D float32 tensor out."""
    g = torch.Generator().manual_seed(SEED + p.index)
    torch.randn(out.shape, generator=g, out=out)
    if len(p.shape) == 2:
        out.mul_(0.02)
    else:
        out.mul_(0.05).add_(1.0)


def param_values(p):
    t = torch.empty(numel(p.shape))
    fill_param(p, t)
    return t.view(p.shape)


def moment(seed, n, second):
    g = torch.Generator().manual_seed(seed)
    t = torch.empty(n).uniform_(generator=g)
    return t.mul_(1e-6) if second else t.sub_(0.5).mul_(1e-3)


def group_flat(group, padded_numel):
    flat = torch.zeros(padded_numel)
    o = 0
    for p in group:
        n = numel(p.shape)
        fill_param(p, flat[o:o + n])
        o += n
    return flat


# --------------------------------------------------------------------------------------
# layout rules


def zero2_layout(numels, world):
    """(N, padded N, partition size P, saved length per rank) of one stage-1/2 param group."""
    n = sum(numels)
    align = 2 * world
    padded = align * math.ceil(n / align)
    part = padded // world
    return n, padded, part, [min(max(n - r * part, 0), part) for r in range(world)]


def zero2_slice_mapping(names, numels, part, rank):
    """name -> (numel, start) of the pieces of each parameter held by rank."""
    out = collections.OrderedDict()
    lo, hi, o = rank * part, rank * part + part, 0
    for name, n in zip(names, numels):
        a, b = max(o, lo), min(o + n, hi)
        if a < b:
            out[name] = (b - a, a - lo)
        o += n
    return out


def zero3_sub_groups(numels, world, sub_group_size):
    """Index lists of the sub-groups DeepSpeed cuts one param group into (by partition numel)."""
    q = [math.ceil(n / world) for n in numels]
    if sub_group_size is None or sub_group_size >= sum(q):
        return [list(range(len(numels)))]
    groups, cur, size = [], [], 0
    for i, qi in enumerate(q):
        cur.append(i)
        size += qi
        if size >= sub_group_size or i == len(numels) - 1:
            groups.append(cur)
            cur, size = [], 0
    return groups


def sub_group_size_of(ds_config):
    zero = (ds_config or {}).get("zero_optimization", {})
    return int(zero.get("sub_group_size", DEFAULT_SUB_GROUP_SIZE))


# --------------------------------------------------------------------------------------
# make


def template_files(stage):
    tag_dir = os.path.join(FIXTURES, TEMPLATES[stage], "global_step3")
    models = sorted(glob.glob(os.path.join(tag_dir, "*_model_states.pt")), key=natural_keys)
    optims = sorted(glob.glob(os.path.join(tag_dir, "*_optim_states.pt")), key=natural_keys)
    return models, optims


def common_model_state(tmpl, model, world, stage, module, param_shapes, shared):
    sd = dict(tmpl)
    ds_config = copy.deepcopy(tmpl["ds_config"])
    ds_config["zero_optimization"] = {"stage": stage}
    sd.update(module=module,
              buffer_names=list(model.buffers),
              param_shapes=param_shapes,
              frozen_param_shapes=collections.OrderedDict(),
              frozen_param_fragments=collections.OrderedDict(),
              shared_params=shared,
              global_steps=STEPS,
              global_samples=STEPS * MICRO_BATCH * world,
              dp_world_size=world,
              ds_config=ds_config)
    return sd, ds_config


def param_groups_state(tmpl_groups, params_per_group):
    out = []
    for g, ids in enumerate(params_per_group):
        pg = copy.deepcopy(tmpl_groups[g])
        pg["params"] = ids
        out.append(pg)
    return out


def make_zero2(model, world, tag_dir, prefix):
    tmodels, toptims = template_files(2)
    tmpl_model, tmpl_optim = load(tmodels[0]), load(toptims[0])
    tmpl_osd = tmpl_optim["optimizer_state_dict"]
    fragment_address = type(next(iter(tmpl_osd["param_slice_mappings"][0].values())))
    assert len(tmpl_osd["base_optimizer_state"]["param_groups"]) == len(model.groups)

    layouts = [zero2_layout([numel(p.shape) for p in g], world) for g in model.groups]
    flats = [group_flat(g, lay[1]) for g, lay in zip(model.groups, layouts)]

    views = {}
    for g, flat in zip(model.groups, flats):
        o = 0
        for p in g:
            views[p.name] = flat[o:o + numel(p.shape)].view(p.shape)
            o += numel(p.shape)
    module = collections.OrderedDict()
    for kind, name in model.state_dict_order:
        module[name] = (model.buffers[name] if kind == "buffer"
                        else views[model.alias[1]] if kind == "alias" else views[name])
    param_shapes = [collections.OrderedDict((p.name, torch.Size(p.shape)) for p in g)
                    for g in model.groups]
    sd, ds_config = common_model_state(tmpl_model, model, world, 2, module, param_shapes,
                                       {model.alias[0]: model.alias[1]})
    torch.save(sd, os.path.join(tag_dir, "mp_rank_00_model_states.pt"))
    del sd, module, views

    for r in range(world):
        osd = dict(tmpl_osd)
        state, single, paddings, mappings = {}, [], [], []
        for gi, (g, flat, (_, _, part, lengths)) in enumerate(zip(model.groups, flats, layouts)):
            owned = flat[r * part:(r + 1) * part].clone().requires_grad_(True)
            single.append(owned[:lengths[r]])
            paddings.append(part - lengths[r])
            seed = SEED * 1000 + 10 * r + gi
            state[gi] = {"step": torch.tensor(float(STEPS)),
                         "exp_avg": moment(2 * seed, part, False),
                         "exp_avg_sq": moment(2 * seed + 1, part, True)}
            m = zero2_slice_mapping([p.name for p in g], [numel(p.shape) for p in g], part, r)
            mappings.append(collections.OrderedDict(
                (k, fragment_address(numel=n, start=s)) for k, (n, s) in m.items()))
        osd.update(base_optimizer_state={
                       "state": state,
                       "param_groups": param_groups_state(
                           tmpl_osd["base_optimizer_state"]["param_groups"],
                           [[gi] for gi in range(len(model.groups))])},
                   single_partition_of_fp32_groups=single,
                   group_paddings=paddings,
                   param_alignment_paddings=[[0] * len(g) for g in model.groups],
                   partition_count=[world] * len(model.groups),
                   param_slice_mappings=mappings)
        path = os.path.join(tag_dir, f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt")
        torch.save({"optimizer_state_dict": osd, "ds_config": ds_config,
                    "ds_version": tmpl_optim["ds_version"]}, path)
        del osd, state, single


def make_zero3(model, world, tag_dir, prefix):
    tmodels, toptims = template_files(3)
    tmpl_model, tmpl_optim = load(tmodels[0]), load(toptims[0])
    tmpl_osd = tmpl_optim["optimizer_state_dict"]
    tmpl_groups = tmpl_osd["optimizer_state_dict"]["param_groups"]
    assert len(tmpl_groups) == len(model.groups)

    sub_groups, group_of_sub = [], []
    for gi, g in enumerate(model.groups):
        for ids in zero3_sub_groups([numel(p.shape) for p in g], world, DEFAULT_SUB_GROUP_SIZE):
            sub_groups.append([g[i] for i in ids])
            group_of_sub.append(gi)
    flats = [group_flat(g, sum(numel(p.shape) for p in g)) for g in model.groups]
    offsets = {}
    for g in model.groups:
        o = 0
        for p in g:
            offsets[p.name] = o
            o += numel(p.shape)

    module = collections.OrderedDict()
    for kind, name in model.state_dict_order:
        module[name] = model.buffers[name] if kind == "buffer" else torch.empty(0)
    param_shapes = [collections.OrderedDict((p.name, torch.Size(p.shape)) for p in sg)
                    for sg in sub_groups]

    for r in range(world):
        shared = {model.alias[0]: model.alias[1]} if r == 0 else {}
        sd, ds_config = common_model_state(tmpl_model, model, world, 3, module, param_shapes,
                                           shared)
        torch.save(sd, os.path.join(tag_dir, f"zero_pp_rank_{r}_mp_rank_00_model_states.pt"))

        fp32_groups, state = [], {}
        for k, sg in enumerate(sub_groups):
            flat = flats[group_of_sub[k]]
            qs = [math.ceil(numel(p.shape) / world) for p in sg]
            part = torch.zeros(sum(qs))
            o = 0
            for p, q in zip(sg, qs):
                n = numel(p.shape)
                lo, hi = min(r * q, n), min(r * q + q, n)
                src = offsets[p.name]
                part[o:o + hi - lo] = flat[src + lo:src + hi]
                o += q
            fp32_groups.append(part.requires_grad_(True))
            seed = SEED * 1000 + 10 * r + k
            state[k] = {"step": torch.tensor(float(STEPS)),
                        "exp_avg": moment(2 * seed, part.numel(), False),
                        "exp_avg_sq": moment(2 * seed + 1, part.numel(), True)}
        osd = dict(tmpl_osd)
        osd.update(partition_count=world,
                   optimizer_state_dict={
                       "state": state,
                       "param_groups": param_groups_state(
                           tmpl_groups,
                           [[k for k, gk in enumerate(group_of_sub) if gk == gi]
                            for gi in range(len(model.groups))])},
                   fp32_flat_groups=fp32_groups)
        path = os.path.join(tag_dir, f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt")
        torch.save({"optimizer_state_dict": osd, "ds_config": ds_config,
                    "ds_version": tmpl_optim["ds_version"]}, path)
        del osd, state, fp32_groups


def make(stage, out, kind, world):
    model = Model(kind)
    tag = f"global_step{STEPS}"
    tag_dir = os.path.join(out, tag)
    os.makedirs(tag_dir, exist_ok=False)
    prefix = "bf16_" if os.path.basename(template_files(stage)[1][0]).startswith("bf16_") else ""
    (make_zero2 if stage == 2 else make_zero3)(model, world, tag_dir, prefix)
    with open(os.path.join(out, "latest"), "w") as f:
        f.write(tag)
    copy_recovery_scripts(out)
    total = sum(numel(p.shape) for p in model.params)
    print(f"{out}: ZeRO-{stage}, world size {world}, {len(model.params)} trainable params, "
          f"{total * 4 / 1e9:.2f} GB fp32 master weights, torch {torch.__version__}")


# --------------------------------------------------------------------------------------
# selftest


def check_fixture_layout(case):
    tag_dir = os.path.join(FIXTURES, case, open(os.path.join(FIXTURES, case, "latest")).read().strip())
    models = sorted(glob.glob(os.path.join(tag_dir, "*_model_states.pt")), key=natural_keys)
    optims = sorted(glob.glob(os.path.join(tag_dir, "*_optim_states.pt")), key=natural_keys)
    world = len(optims)
    m0 = load(models[0])
    osds = [load(f)["optimizer_state_dict"] for f in optims]
    stage = int(osds[0]["zero_stage"])
    if stage <= 2:
        for g, shapes in enumerate(m0["param_shapes"]):
            names = list(shapes)
            numels = [s.numel() for s in shapes.values()]
            _, padded, part, lengths = zero2_layout(numels, world)
            o = 0
            for name, n in zip(names, numels):
                t = m0["module"][name]
                msize = t.untyped_storage().nbytes() // t.element_size()
                assert (t.storage_offset(), msize) == (o, padded), (case, name)
                o += n
            for r, osd in enumerate(osds):
                t = osd["single_partition_of_fp32_groups"][g]
                assert t.numel() == lengths[r], (case, r, g)
                assert t.untyped_storage().nbytes() == part * t.element_size(), (case, r, g)
                assert osd["group_paddings"][g] == part - lengths[r], (case, r, g)
                assert osd["partition_count"][g] == world, (case, r, g)
                assert osd["base_optimizer_state"]["state"][g]["exp_avg"].numel() == part
                got = {k: (v.numel, v.start) for k, v in osd["param_slice_mappings"][g].items()}
                assert got == dict(zero2_slice_mapping(names, numels, part, r)), (case, r, g)
    else:
        groups = osds[0]["optimizer_state_dict"]["param_groups"]
        subs = [list(s.items()) for s in m0["param_shapes"]]
        sgs = sub_group_size_of(m0["ds_config"])
        for pg in groups:
            members = [kv for k in pg["params"] for kv in subs[k]]
            ids = zero3_sub_groups([s.numel() for _, s in members], world, sgs)
            assert [[members[i][0] for i in sg] for sg in ids] == \
                [[n for n, _ in subs[k]] for k in pg["params"]], case
        for osd in osds:
            assert osd["partition_count"] == world, case
            for k, sub in enumerate(subs):
                want = sum(math.ceil(s.numel() / world) for _, s in sub)
                assert osd["fp32_flat_groups"][k].numel() == want, (case, k)
                assert osd["optimizer_state_dict"]["state"][k]["exp_avg"].numel() == want
    return stage, world


# entries keyed by parameter names or indices (lists of such maps for the list-valued ones)
NAME_MAPS = {"module", "frozen_param_shapes", "frozen_param_fragments", "shared_params", "state",
             "param_shapes", "param_slice_mappings"}


def same_structure(a, b, where, name_map=False):
    """b has a's keys and types (tensors: dtype and requires_grad); in name-keyed maps and in
    lists every value of b need only be shaped like some value of a."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and (a.dtype, a.requires_grad) == (b.dtype, b.requires_grad)):
            raise AssertionError(f"{where}: {a!r:.60} vs {b!r:.60}")
        return
    if type(a) is not type(b):
        raise AssertionError(f"{where}: {type(a).__qualname__} vs {type(b).__qualname__}")
    if isinstance(a, torch.Size):
        return
    if isinstance(a, dict) and name_map:
        for k, v in b.items():
            errors = []
            for t in a.values():
                try:
                    same_structure(t, v, f"{where}/{k}")
                    break
                except AssertionError as e:
                    errors.append(e)
            else:
                if errors:
                    raise errors[0]
    elif isinstance(a, dict):
        if list(a) != list(b):
            raise AssertionError(f"{where}: keys {list(a)} vs {list(b)}")
        for k in a:
            same_structure(a[k], b[k], f"{where}/{k}", k in NAME_MAPS)
    elif isinstance(a, (list, tuple)):
        for i, v in enumerate(b):
            if a:
                same_structure(a[min(i, len(a) - 1)], v, f"{where}[{i}]", name_map)


def compare_structure(tmpl_path, path):
    same_structure(load(tmpl_path), load(path), os.path.basename(path))


def copy_recovery_scripts(out):
    """What engine.save_checkpoint does: DeepSpeed's converters next to `latest`, executable
    (run from there: inside the package, deepspeed/utils/torch.py would shadow torch)."""
    import deepspeed.utils
    src_dir = os.path.dirname(deepspeed.utils.__file__)
    for script in ("zero_to_fp32.py", "zero_to_torch.py"):
        if os.path.exists(os.path.join(src_dir, script)):
            dst = os.path.join(out, script)
            shutil.copyfile(os.path.join(src_dir, script), dst)
            os.chmod(dst, os.stat(dst).st_mode | stat.S_IEXEC)


def run_deepspeed_zero_to_fp32(ckpt, out):
    subprocess.run([sys.executable, os.path.join(ckpt, "zero_to_fp32.py"), ckpt, out], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def selftest(keep):
    cases = sorted(c for c in os.listdir(FIXTURES) if re.match(r"stage[123]_", c))
    for case in cases:
        stage, world = check_fixture_layout(case)
        print(f"layout rules reproduce {case} (stage {stage}, W={world})")
    work = keep or tempfile.mkdtemp(prefix="zero_bench_")
    for stage in (2, 3):
        for world in (2, 4):
            ckpt = os.path.join(work, f"tiny_stage{stage}_ws{world}")
            make(stage, ckpt, "tiny", world)
            tag_dir = os.path.join(ckpt, f"global_step{STEPS}")
            tmodels, toptims = template_files(stage)
            compare_structure(tmodels[0], sorted(glob.glob(os.path.join(tag_dir, "*_model_states.pt")))[0])
            compare_structure(toptims[0], sorted(glob.glob(os.path.join(tag_dir, "*_optim_states.pt")))[0])
            out = os.path.join(work, f"tiny_stage{stage}_ws{world}_out")
            run_deepspeed_zero_to_fp32(ckpt, out)
            check_values("tiny", out)
    if not keep:
        subprocess.run(["rm", "-rf", work], check=True)
    print("selftest passed")


# --------------------------------------------------------------------------------------
# reading consolidated outputs


def load_output(out_dir):
    """Tensors of a zero_to_fp32-style output directory (.bin, optionally sharded), in order."""
    index = os.path.join(out_dir, "pytorch_model.bin.index.json")
    if os.path.exists(index):
        weight_map = json.load(open(index))["weight_map"]
        files = sorted(set(weight_map.values()))
    elif os.path.exists(os.path.join(out_dir, "pytorch_model.bin")):
        files = ["pytorch_model.bin"]
    else:
        raise SystemExit(f"{out_dir}: no pytorch_model.bin or pytorch_model.bin.index.json")
    tensors = collections.OrderedDict()
    for f in files:
        tensors.update(torch.load(os.path.join(out_dir, f), map_location="cpu",
                                  weights_only=True, mmap=True))
    return tensors


def raw(t):
    return t.reshape(-1).view(torch.uint8)


def aliases(tensors):
    first, out = {}, {}
    for name, t in tensors.items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
        if t.numel() and key in first:
            out[name] = first[key]
        first.setdefault(key, name)
    return out


def check_values(kind, out_dir):
    model = Model(kind)
    got = load_output(out_dir)
    want = list(model.buffers) + [p.name for g in model.groups for p in g] + [model.alias[0]]
    if list(got) != want:
        raise SystemExit(f"{out_dir}: tensor names/order differ from the generated model:\n"
                         f"  got  {list(got)[:6]}...\n  want {want[:6]}...")
    bad = []
    for name, t in model.buffers.items():
        if not torch.equal(raw(got[name]), raw(t)):
            bad.append(name)
    for p in model.params:
        t = got[p.name]
        if t.dtype != torch.float32 or tuple(t.shape) != p.shape or \
                not torch.equal(raw(t), raw(param_values(p))):
            bad.append(p.name)
    if aliases(got).get(model.alias[0]) != model.alias[1]:
        bad.append(model.alias[0] + " (not the same tensor as " + model.alias[1] + ")")
    if bad:
        raise SystemExit(f"{out_dir}: values differ from the generated ones: {', '.join(bad)}")
    print(f"{out_dir}: all {len(got)} tensors equal the generated values")


def compare(a_dir, b_dir):
    a, b = load_output(a_dir), load_output(b_dir)
    problems = []
    if list(a) != list(b):
        problems.append(f"names/order: {list(a)[:4]}... vs {list(b)[:4]}...")
    for name in a:
        if name not in b:
            continue
        x, y = a[name], b[name]
        if (x.dtype, tuple(x.shape)) != (y.dtype, tuple(y.shape)):
            problems.append(f"{name}: {x.dtype} {tuple(x.shape)} vs {y.dtype} {tuple(y.shape)}")
        elif not torch.equal(raw(x), raw(y)):
            problems.append(f"{name}: bytes differ")
    if aliases(a) != aliases(b):
        problems.append(f"aliases: {aliases(a)} vs {aliases(b)}")
    if problems:
        raise SystemExit(f"{a_dir} and {b_dir} differ:\n  " + "\n  ".join(problems[:20]))
    nbytes = sum(t.numel() * t.element_size() for t in a.values())
    print(f"identical: {len(a)} tensors ({nbytes / 1e9:.2f} GB), names, order, dtypes, shapes, "
          f"bytes and aliases ({', '.join(f'{k} = {v}' for k, v in aliases(a).items()) or 'none'})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--stage", type=int, choices=(2, 3), required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--model", choices=sorted(MODELS), default="llama")
    m.add_argument("--world-size", type=int, default=4)
    s = sub.add_parser("selftest")
    s.add_argument("--keep", help="write the tiny checkpoints here and keep them")
    c = sub.add_parser("check-values")
    c.add_argument("--model", choices=sorted(MODELS), default="llama")
    c.add_argument("output_dir")
    p = sub.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    args = ap.parse_args()
    if args.cmd == "make":
        make(args.stage, args.out, args.model, args.world_size)
    elif args.cmd == "selftest":
        selftest(args.keep)
    elif args.cmd == "check-values":
        check_values(args.model, args.output_dir)
    else:
        compare(args.a, args.b)


if __name__ == "__main__":
    main()
