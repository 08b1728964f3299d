"""Writes testdata/paddlenlp/<case>/: one tiny PaddleNLP LLaMA checkpoint (model and AdamW
optimizer state after one real step) laid out for several tensor-parallel (TP) and
pipeline-parallel (PP) degrees, for `ckptconv reshard` on PaddleNLP checkpoints.

Needs paddlepaddle 2.6 and paddlenlp 2.8 (the environment of README_paddlenlp.md):
    python testdata/gen/gen_paddlenlp_reshard.py

See README_paddlenlp_reshard.md. The TP split uses PaddleNLP's own
LlamaForCausalLM._get_tensor_parallel_mappings (is_split=True) on the model state and on the
optimizer's per-parameter tensors; the merge check uses the same function with is_split=False.
The PP split follows paddle's SegmentLayers with PaddleNLP's seg_method for LLaMA. Every case
directory gets expected.json (each file's tensors, name tables, LR_Scheduler). The generator
stops on the first failed check.
"""

import argparse
import collections
import copy
import hashlib
import json
import os
import pickle
import re
import shutil
import struct
import sys
import types
import warnings

import numpy as np

warnings.simplefilter("ignore")
os.environ.setdefault("PADDLE_SDK_DISABLE_TELEMETRY", "1")
import paddle  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402
from paddle.distributed.fleet.meta_parallel.parallel_layers.pp_layers import (  # noqa: E402
    LayerDesc, SegmentLayers)
import paddlenlp  # noqa: E402
from paddlenlp.trainer.training_args import TrainingArguments  # noqa: E402
from paddlenlp.trainer.plugins.unified_checkpoint import generate_base_static_name  # noqa: E402
from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from paddlenlp.transformers.llama import modeling_pp  # noqa: E402
from paddlenlp.transformers.model_utils import _add_variant, shard_checkpoint  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTDATA)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
import gen_paddlenlp_llama as gl  # noqa: E402
import gen_paddlenlp_logits as glog  # noqa: E402
import paddlenlp_merge as pm  # noqa: E402

OUT = os.path.join(TESTDATA, "paddlenlp")
NH, NKV, LAYERS = 4, 2, 4
# hidden 16 / intermediate 32 (head_dim 4) keeps the ten cases, each with a full AdamW state,
# under 3 MB; hidden 64 / intermediate 128 (the testdata/llama sizes) gives about 23 MB.
BASE = dict(vocab_size=128, hidden_size=16, intermediate_size=32, num_attention_heads=NH,
            num_key_value_heads=NKV, num_hidden_layers=LAYERS, max_position_embeddings=128,
            seq_length=128, fuse_attention_qkv=False, fuse_attention_ffn=True,
            tie_word_embeddings=False)
SEED = 11            # parameters (numpy default_rng)
BATCH_SEED = 12      # token ids of the training batch
LR, T_MAX, WD = 1e-3, 10, 0.01
NAME_TABLE = "StructuredToParameterName@@"
# (dtype, tp, pp) of every case
LAYOUTS = [("fp32", 1, 1), ("fp32", 2, 1), ("fp32", 1, 2), ("fp32", 2, 2), ("fp32", 1, 4),
           ("fp32", 4, 1), ("bf16", 1, 1), ("bf16", 2, 1), ("bf16", 1, 2), ("bf16", 2, 2)]


def versions():
    return gl.versions()


def config(dtype="float32"):
    return LlamaConfig(dtype=dtype, **BASE)


def case_name(dtype, tp, pp):
    if tp == 1 and pp == 1:
        return f"{dtype}_tp1"
    return f"{dtype}_" + (f"tp{tp}" if tp > 1 else "") + (f"pp{pp}" if pp > 1 else "")


# ------------------------------------------------------------------------ file names

def suffix(kind, tp, tp_rank, pp, pp_rank):
    """PaddleNLP's TrainingArguments.weight_name_suffix / optimizer_name_suffix, run on the
    fields a (no sharding, no expert parallel) TP x PP run has."""
    args = types.SimpleNamespace(
        use_hybrid_parallel=tp > 1 or pp > 1, tensor_parallel_degree=tp,
        tensor_parallel_rank=tp_rank, pipeline_parallel_degree=pp, pipeline_parallel_rank=pp_rank,
        sharding_parallel_degree=1, sharding_parallel_rank=0, use_expert_parallel=False,
        data_parallel_rank=0)
    prop = {"model": TrainingArguments.weight_name_suffix,
            "optimizer": TrainingArguments.optimizer_name_suffix}[kind]
    return prop.fget(args)


def model_file(tp, r, pp, s):
    return _add_variant("model_state.pdparams", suffix("model", tp, r, pp, s))


def optimizer_file(tp, r, pp, s):
    return _add_variant("optimizer.pdopt", suffix("optimizer", tp, r, pp, s))


# ------------------------------------------------------------------------ model and step

def train_batch():
    ids = np.random.default_rng(BATCH_SEED).integers(0, BASE["vocab_size"], size=(2, 17))
    return paddle.to_tensor(ids[:, :-1]), paddle.to_tensor(ids[:, 1:])


def new_optimizer(params, multi_precision):
    """AdamW + CosineAnnealingDecay, created under a fresh unique_name guard so that the
    accumulator names end in _0."""
    with paddle.utils.unique_name.guard():
        sched = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=LR, T_max=T_MAX)
        opt = paddle.optimizer.AdamW(learning_rate=sched, parameters=params, weight_decay=WD,
                                     multi_precision=multi_precision)
    return opt, sched


def fp32_step(weights=None):
    """The single-card fp32 model after one real AdamW step on the LM loss."""
    m = gl.build(config(), SEED, weights)
    m.train()
    with paddle.utils.unique_name.guard():   # accumulators are named at the first step
        opt, sched = new_optimizer(m.parameters(), False)
        x, y = train_batch()
        loss = m(x, labels=y)[0]
        loss.backward()
        opt.step()
        opt.clear_grad()
        sched.step()
    m.eval()
    return m, opt, float(loss)


def widen(a):
    """bfloat16 bit patterns (numpy uint16) -> float32, exact."""
    assert a.dtype == np.uint16, a.dtype
    return (a.astype(np.uint32) << 16).view(np.float32)


def bf16_step():
    """The bf16 model with fp32 master weights after one AdamW(multi_precision=True) step.

    paddle 2.6.2 has no CPU bfloat16 kernel for matmul or adamw, so the step itself runs on an
    fp32 copy whose weights are the bf16 weights widened (what multi_precision makes the master
    weights from). The bf16 model's own AdamW(multi_precision=True) creates its accumulators and
    master weights with the code Optimizer._create_optimization_pass runs before the adamw kernel
    (LayerHelper, _create_global_learning_rate, _create_accumulators); they then get the fp32
    step's values: moments and beta pow accumulators as they are, master weight = the updated
    fp32 weight, bf16 parameter = paddle's cast of it to bfloat16 (what the GPU kernel writes)."""
    b = gl.build(config(), SEED)
    b.to(dtype="bfloat16")
    b.config.dtype = "bfloat16"
    start = collections.OrderedDict((k, widen(v.numpy())) for k, v in b.state_dict().items())
    f, fopt, loss = fp32_step(start)
    fstate = fopt.state_dict()
    opt, sched = new_optimizer(b.parameters(), True)
    with paddle.utils.unique_name.guard():
        opt.helper = LayerHelper(opt.__class__.__name__)
        opt._create_global_learning_rate()
        opt._create_accumulators(paddle.static.default_main_program().global_block(),
                                 [p for p in b.parameters() if not p.stop_gradient])
    state = opt.state_dict()
    fparams = {p.name: p for p in f.parameters()}
    for key, t in state.items():
        if isinstance(t, paddle.Tensor):
            src = fstate[key.replace("_fp32_master_0_", "_")]
            t.set_value(src.numpy())
    for p in b.parameters():
        new = fparams[p.name].numpy()
        state["master_weights"][p.name].set_value(new)
        p.set_value(paddle.to_tensor(new).astype("bfloat16"))
    sched.step()
    state = opt.state_dict()
    assert state["LR_Scheduler"] == fstate["LR_Scheduler"], state["LR_Scheduler"]
    b.eval()
    return b, opt, loss


# ------------------------------------------------------------------------ state helpers

def numpy_state(m):
    return collections.OrderedDict((k, v.numpy()) for k, v in m.state_dict().items())


def var_names(m):
    return collections.OrderedDict((k, v.name) for k, v in m.state_dict().items())


class OptState:
    """opt.state_dict() as numpy: per-tensor key -> (paddle name, array), in state_dict order;
    master_weights {param var: (paddle name, array)}; LR_Scheduler."""

    def __init__(self, sd):
        self.tensors = collections.OrderedDict()
        self.master = None
        self.lr = None
        self.top_order = list(sd)
        self.raw = sd
        for k, v in sd.items():
            if k == "LR_Scheduler":
                self.lr = dict(v)
            elif k == "master_weights":
                self.master = collections.OrderedDict((n, (t.name, t.numpy())) for n, t in v.items())
            else:
                self.tensors[k] = (v.name, v.numpy())

    @staticmethod
    def param_of(key):
        """PaddleNLP's generate_base_static_name: (param var name, accumulator type)."""
        var, kind = generate_base_static_name(key)
        return var, kind


def wrap(name, a):
    t = paddle.Tensor(np.ascontiguousarray(a), zero_copy=False, place=paddle.CPUPlace())
    t.name = name
    return t


def save_optimizer(opt_state, path, tensors, master):
    """paddle.save of an optimizer state laid out as opt.state_dict() is: tensors (key of the
    single-card state -> (paddle name, array), saved under the paddle name, which is the stage's
    own), then master_weights, then LR_Scheduler, in the original order."""
    out = {}   # a plain dict, as opt.state_dict() is (kept as such in variant B2)
    for k in opt_state.top_order:
        if k == "LR_Scheduler":
            out[k] = dict(opt_state.lr)
        elif k == "master_weights":
            out[k] = {n: wrap(*master[n]) for n in master}   # a plain dict, as in state_dict()
        elif k in tensors:
            out[tensors[k][0]] = wrap(*tensors[k])
    paddle.save(out, path)


# ------------------------------------------------------------------------ TP and PP rules

def tp_actions(cfg, tp, rank, keys, is_split=True):
    """{model key: action} from PaddleNLP's _get_tensor_parallel_mappings, with the keys
    resolved by _resolve_prefix_keys as convert_tensor_parallel / merge_tensor_parallel do."""
    c = copy.deepcopy(cfg)
    c.tensor_parallel_degree, c.tensor_parallel_rank = tp, rank
    actions = LlamaForCausalLM._get_tensor_parallel_mappings(c, is_split=is_split)
    resolved = LlamaForCausalLM._resolve_prefix_keys(actions.keys(), keys)
    return {v: actions[k] for k, v in resolved.items()}


def tp_rule_names(cfg, tp, keys):
    """The rule PaddleNLP applies to each key, in words (for expected.json and the checker)."""
    c = copy.deepcopy(cfg)
    c.tensor_parallel_degree, c.tensor_parallel_rank = tp, 0
    actions = LlamaForCausalLM._get_tensor_parallel_mappings(c, is_split=True)
    resolved = LlamaForCausalLM._resolve_prefix_keys(actions.keys(), keys)
    rules = collections.OrderedDict((k, "replicated") for k in keys)
    for base, key in resolved.items():
        kw = actions[base].keywords
        rules[key] = ("naive_2fuse_" if kw.get("is_naive_2fuse") else "") + (
            "column" if kw["is_column"] else "row")
    return rules


def pp_stages(pp):
    """Stage of each model key: paddle's SegmentLayers over LlamaForCausalLMPipe's layer list
    (embedding, decoder layers, norm, lm_head) with the seg_method PaddleNLP picks."""
    descs = ([LayerDesc(modeling_pp.LlamaEmbeddingPipe)]
             + [LayerDesc(modeling_pp.LlamaDecoderLayerPipe) for _ in range(LAYERS)]
             + [LayerDesc(modeling_pp.LlamaRMSNormPipe), LayerDesc(modeling_pp.LlamaLMHead)])
    prefixes = (["llama.embed_tokens."] + [f"llama.layers.{i}." for i in range(LAYERS)]
                + ["llama.norm.", "lm_head."])
    method = "layer:LlamaDecoderLayer" if LAYERS % pp == 0 else "uniform"
    bounds = SegmentLayers(descs, num_parts=pp, method=method).do_segment()
    stage_of_prefix = {}
    for s in range(pp):
        for i in range(bounds[s], bounds[s + 1]):
            stage_of_prefix[prefixes[i]] = s
    return stage_of_prefix, bounds, method


def stage_vars(cfg, pp, s, stage_keys, names, shapes):
    """{variable name in the single-card model: the name a process of stage s gives it}. A
    pipeline process builds only its stage's layers (PipelineLayer builds its own segment of
    LayerDescs), and paddle's unique_name counts per process, so every stage names its
    parameters from 0 (linear_0.w_0, create_parameter_0.w_0, llama_lm_head_0.w_0): the stage's
    layers are built here under a fresh unique_name.guard, as that process builds them. The
    names do not depend on TP (ColumnParallelLinear and RowParallelLinear are named linear,
    VocabParallelEmbedding embedding), so the layers are built at TP 1."""
    if pp == 1:
        return {names[k]: names[k] for k in stage_keys}
    c = copy.deepcopy(cfg)
    c.tensor_parallel_degree, c.tensor_parallel_rank, c.dtype = 1, 0, "float32"
    descs = ([LayerDesc(modeling_pp.LlamaEmbeddingPipe, config=c)]
             + [LayerDesc(modeling_pp.LlamaDecoderLayerPipe, config=c) for _ in range(LAYERS)]
             + [LayerDesc(modeling_pp.LlamaRMSNormPipe, config=c), LayerDesc(modeling_pp.LlamaLMHead, config=c)])
    _, bounds, _ = pp_stages(pp)
    with paddle.utils.unique_name.guard():
        built = [p for i in range(bounds[s], bounds[s + 1]) for p in descs[i].build_layer().state_dict().values()]
    assert len(built) == len(stage_keys), (s, len(built), len(stage_keys))
    for k, p in zip(stage_keys, built):
        assert list(p.shape) == list(shapes[k]), (k, p.shape, shapes[k])
    return {names[k]: p.name for k, p in zip(stage_keys, built)}


def local_key(key, local):
    """An optimizer key <var>_<accumulator> with the stage's own variable name."""
    var, _ = OptState.param_of(key)
    assert key.startswith(var + "_"), key
    return local[var] + key[len(var):]


def stage_of(key, stage_of_prefix):
    hits = [s for p, s in stage_of_prefix.items() if key.startswith(p)]
    assert len(hits) == 1, key
    return hits[0]


# ------------------------------------------------------------------------ records

def reported_dtype(a):
    return {"<f4": "float32", "<u2": "bfloat16"}[a.dtype.str]


def record(name, a):
    a = np.ascontiguousarray(a)
    return {"name": name, "dtype": reported_dtype(a), "shape": list(a.shape),
            "sha256": hashlib.sha256(a.tobytes()).hexdigest()}


def loaded_records(path):
    """Tensors of a file as paddle.load(return_numpy=True) returns them, in file order;
    master_weights entries as master_weights/<var>."""
    obj = paddle.load(path, return_numpy=True)
    recs = []
    for k, v in obj.items():
        if isinstance(v, np.ndarray):
            recs.append(record(k, v))
        elif k == "master_weights":
            recs.extend(record(f"master_weights/{n}", a) for n, a in v.items())
    return recs, obj


def pickle_facts(path):
    """The pickle variant (A: arrays plus the name table; B2: (name, array) tuples, no table),
    the name table and the paddle names of B2 tuples."""
    with open(path, "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    tuples = {}

    def walk(obj, path_):
        for k, v in obj.items():
            if isinstance(v, dict):
                walk(v, f"{path_}{k}/")
            elif isinstance(v, tuple):
                tuples[f"{path_}{k}"] = v[0]
    walk(raw, "")
    table = raw.get(NAME_TABLE)
    variant = "B2" if tuples else "A"
    assert (variant == "A") == (table is not None), path
    return variant, table, tuples


# ------------------------------------------------------------------------ writing a case

def write_config(cfg, d, tp, pp):
    """config.json as rank 0 of a run of that layout writes it with save_pretrained:
    tp1 pp1: LlamaForCausalLM, tensor_parallel_degree left at its default (-1, not written);
    tpN: the llm scripts set config.tensor_parallel_degree = N (rank 0 writes, rank 0 is the
    default, not written); ppM: LlamaForCausalLMPipe.__init__ sets tensor_parallel_degree =
    max(mp world size, 1) and the saved architectures is the Pipe class. Nothing records pp."""
    c = copy.deepcopy(cfg)
    if tp > 1 or pp > 1:
        c.tensor_parallel_degree = tp
        c.tensor_parallel_rank = 0
    c.architectures = ["LlamaForCausalLMPipe" if pp > 1 else "LlamaForCausalLM"]
    c.save_pretrained(d)


def write_case(dtype, tp, pp, model, opt_state, names, cfg, gen_cfg):
    case = case_name(dtype, tp, pp)
    d = fresh_dir(case)
    state = numpy_state(model)
    keys = list(state)
    stage_of_prefix, bounds, method = pp_stages(pp)
    files = collections.OrderedDict()
    var_to_key = {v: k for k, v in names.items()}
    locals_ = {}
    for s in range(pp):
        stage_keys = [k for k in keys if stage_of(k, stage_of_prefix) == s]
        local = locals_[s] = stage_vars(cfg, pp, s, stage_keys, names, {k: state[k].shape for k in keys})
        local_names = {k: local[names[k]] for k in stage_keys}
        for r in range(tp):
            actions = tp_actions(cfg, tp, r, keys) if tp > 1 else {}
            part = collections.OrderedDict(
                (k, actions[k](state[k]) if k in actions else state[k]) for k in stage_keys)
            mf = model_file(tp, r, pp, s)
            if tp == 1 and pp == 1:
                with paddle.utils.unique_name.guard():
                    model.save_pretrained(d)
                assert os.listdir(d) and mf in os.listdir(d)
                # the wrapped save writes the same bytes as save_pretrained
                tmp = os.path.join(d, "_check.pdparams")
                gl.save_state(part, tmp, names)
                same_bytes = open(tmp, "rb").read() == open(os.path.join(d, mf), "rb").read()
                os.remove(tmp)
                assert same_bytes, "wrapped paddle.save differs from save_pretrained"
            else:
                gl.save_state(part, os.path.join(d, mf), local_names)
            files[mf] = ("model", s, r)
            tensors = collections.OrderedDict()
            for k, (pname, a) in opt_state.tensors.items():
                var, kind = OptState.param_of(k)
                if var not in local:
                    continue
                sk = var_to_key[var]
                if kind.startswith("moment"):
                    assert a.shape == state[sk].shape, k
                    a = actions[sk](a) if sk in actions else a
                else:
                    assert a.shape == (1,), k   # beta pow accumulators: on every rank
                assert pname == k, k
                tensors[k] = (local_key(k, local), a)
            master = None
            if opt_state.master is not None:
                master = collections.OrderedDict()
                for var, (pname, a) in opt_state.master.items():
                    if var in local:
                        sk = var_to_key[var]
                        assert pname == var + "_fp32_master_0", pname
                        master[local[var]] = (local[var] + "_fp32_master_0", actions[sk](a) if sk in actions else a)
            of = optimizer_file(tp, r, pp, s)
            save_optimizer(opt_state, os.path.join(d, of), tensors, master)
            if tp == 1 and pp == 1:
                # the single-card file is paddle.save(opt.state_dict()) itself; the wrapped
                # save used for the split files writes the same bytes
                wrapped = open(os.path.join(d, of), "rb").read()
                paddle.save(opt_state.raw, os.path.join(d, of))
                assert open(os.path.join(d, of), "rb").read() == wrapped, "optimizer bytes differ"
            files[of] = ("optimizer", s, r)
    if not (tp == 1 and pp == 1):
        write_config(cfg, d, tp, pp)
        gen_cfg.save_pretrained(d)
    check_merge(d, files, tp, pp, state, opt_state, cfg, names, locals_)
    describe(d, case, dtype, tp, pp, files, cfg, keys, bounds, method, stage_of_prefix)
    return d


def fresh_dir(name):
    d = os.path.join(OUT, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


# ------------------------------------------------------------------------ checks

def same(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def check_merge(d, files, tp, pp, state, opt_state, cfg, names, locals_):
    """Merging the written files with PaddleNLP's merge functions (is_split=False) and PP by
    union gives back the TP1 model and optimizer state bit for bit (a stage's variable names
    mapped back to the single-card model's)."""
    var_to_key = {v: k for k, v in names.items()}
    grid = {}
    for f, (kind, s, r) in files.items():
        obj = paddle.load(os.path.join(d, f), return_numpy=True)
        grid[(kind, s, r)] = obj
    merged_model, merged_opt, merged_master = {}, {}, {}
    keys = list(state)
    merge_actions = tp_actions(cfg, tp, 0, keys, is_split=False) if tp > 1 else {}
    for s in range(pp):
        ranks_m = [grid[("model", s, r)] for r in range(tp)]
        for k in ranks_m[0]:
            if k == NAME_TABLE:
                continue
            parts = [x[k] for x in ranks_m]
            if k in merge_actions:
                merged_model[k] = merge_actions[k](parts)
            else:
                assert all(same(p, parts[0]) for p in parts), f"{d}: {k} not replicated"
                merged_model[k] = parts[0]
        ranks_o = [grid[("optimizer", s, r)] for r in range(tp)]
        single = {lv: gv for gv, lv in locals_[s].items()}
        for k, v in ranks_o[0].items():
            if k in (NAME_TABLE, "LR_Scheduler"):
                for x in ranks_o:
                    assert x[k] == v, k
                continue
            if k == "master_weights":
                for var in v:
                    parts = [x[k][var] for x in ranks_o]
                    sk = var_to_key[single[var]]
                    merged_master[single[var]] = (merge_actions[sk](parts) if sk in merge_actions
                                                  else parts[0])
                continue
            parts = [x[k] for x in ranks_o]
            lv = OptState.param_of(k)[0]
            gk = single[lv] + k[len(lv):]
            sk = var_to_key[single[lv]]
            if sk in merge_actions and v.shape != (1,):
                merged_opt[gk] = merge_actions[sk](parts)
            else:
                assert all(same(p, parts[0]) for p in parts), f"{d}: {k} not replicated"
                merged_opt[gk] = parts[0]
    assert list(merged_model) == keys or set(merged_model) == set(keys), d
    for k in keys:
        assert same(merged_model[k], state[k]), f"{d}: merged {k} differs"
    assert set(merged_opt) == set(opt_state.tensors), d
    for k, (_, a) in opt_state.tensors.items():
        assert same(merged_opt[k], a), f"{d}: merged {k} differs"
    if opt_state.master is not None:
        assert set(merged_master) == set(opt_state.master), d
        for var, (_, a) in opt_state.master.items():
            assert same(merged_master[var], a), f"{d}: merged master {var} differs"


def check_against_convert_tensor_parallel(state, cfg, tp, d, names):
    """The model files equal PaddleNLP's convert_tensor_parallel output, rank by rank."""
    for r in range(tp):
        c = copy.deepcopy(cfg)
        c.tensor_parallel_degree, c.tensor_parallel_rank = tp, r
        part = LlamaForCausalLM.convert_tensor_parallel(None, c, state_dict=dict(state))
        got = paddle.load(os.path.join(d, model_file(tp, r, 1, 0)), return_numpy=True)
        for k in state:
            a = part[k].numpy() if isinstance(part[k], paddle.Tensor) else part[k]
            assert same(np.asarray(a), got[k]), f"{d}: {k} differs from convert_tensor_parallel"


def check_checker(d, want):
    """tests/interop/paddlenlp_merge.py (plain numpy rules) gives the TP1 hashes."""
    got = pm.merge_dir(d)
    assert got == want, f"{d}: paddlenlp_merge.py differs: " + ", ".join(
        k for part in ("model", "optimizer") for k in set(got[part]) ^ set(want[part])
        or [k for k in got[part] if got[part][k] != want[part].get(k)])


# ------------------------------------------------------------------------ expected.json

B2_NAMES = ("the (name, ndarray) tuple of <key> is named <key>; that of "
            "master_weights/<var> is named <var>_fp32_master_0")


def write_json(path, obj):
    """JSON with one tensor record per line."""
    text = json.dumps(obj, indent=1)
    text = re.sub(r'\{\n\s+"name": [^{}]*?\n\s+\}',
                  lambda m: json.dumps(json.loads(m.group(0)), separators=(",", ":")), text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def describe(d, case, dtype, tp, pp, files, cfg, keys, bounds, method, stage_of_prefix):
    exp = collections.OrderedDict()
    exp["case"] = case
    exp["versions"] = versions()
    exp["tp"], exp["pp"], exp["dtype"] = tp, pp, {"fp32": "float32", "bf16": "bfloat16"}[dtype]
    exp["num_attention_heads"], exp["num_key_value_heads"] = NH, NKV
    exp["num_hidden_layers"] = LAYERS
    exp["files"] = collections.OrderedDict()
    exp["pickle_variant"] = collections.OrderedDict()
    exp["name_tables"] = collections.OrderedDict()
    exp["b2_paddle_names"] = collections.OrderedDict()
    exp["optimizer_extra"] = collections.OrderedDict()
    exp["file_layout"] = collections.OrderedDict()
    for f, (kind, s, r) in files.items():
        path = os.path.join(d, f)
        recs, obj = loaded_records(path)
        exp["files"][f] = recs
        variant, table, tuples = pickle_facts(path)
        exp["pickle_variant"][f] = variant
        if kind == "model":
            exp["name_tables"][f] = table
        elif table is not None:
            # a variant A optimizer file: every key is its own tensor's name
            assert table == {k: k for k in table} and set(table) == {
                x["name"] for x in recs}, f
            exp["name_tables"][f] = "identity"
        if tuples:
            for k, name in tuples.items():
                want = (k.split("/")[1] + "_fp32_master_0" if k.startswith("master_weights/")
                        else k)
                assert name == want, (f, k, name)
            exp["b2_paddle_names"][f] = B2_NAMES
        if kind == "optimizer":
            exp["optimizer_extra"][f] = {"LR_Scheduler": obj["LR_Scheduler"]}
        exp["file_layout"][f] = {"kind": kind, "tp_rank": r, "pp_rank": s}
    exp["tp_rules"] = tp_rule_names(cfg, tp, keys) if tp > 1 else None
    exp["pp_segment"] = {"method": method, "bounds": bounds,
                         "stage_of": {p.rstrip("."): s for p, s in stage_of_prefix.items()}}
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        exp["config_json"] = json.load(f)
    write_json(os.path.join(d, "expected.json"), exp)


# ------------------------------------------------------------------------ unified checkpoint

def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n), object_pairs_hook=collections.OrderedDict)


def gen_unified(model, names):
    """The fp32 model written by PaddleNLP's save_pretrained(safe_serialization=True) with a
    max_shard_size that gives two files."""
    d = fresh_dir("unified_fp32")
    state = numpy_state(model)
    total = sum(a.nbytes for a in state.values())
    # the smallest limit (in steps of 1/16 of the total) for which PaddleNLP's shard_checkpoint
    # gives two files
    limit = next(total * i // 16 for i in range(8, 17)
                 if len(shard_checkpoint(model.state_dict(), max_shard_size=total * i // 16,
                                         weights_name="model.safetensors")[0]) == 2)
    with paddle.utils.unique_name.guard():
        model.save_pretrained(d, safe_serialization=True, max_shard_size=limit)
    shards = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    assert shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"], shards
    with open(os.path.join(d, "model.safetensors.index.json"), encoding="utf-8") as f:
        index = json.load(f, object_pairs_hook=collections.OrderedDict)
    from safetensors.numpy import load_file
    exp = collections.OrderedDict(case="unified_fp32", versions=versions(), tp=1, pp=1,
                                  dtype="float32", files=collections.OrderedDict(),
                                  safetensors_header=collections.OrderedDict(), index=index)
    merged = {}
    for f in shards:
        header = safetensors_header(os.path.join(d, f))
        exp["safetensors_header"][f] = header
        arrays = load_file(os.path.join(d, f))
        # file order: the order of the data (safetensors sorts the header)
        order = sorted((k for k in header if k != "__metadata__"),
                       key=lambda k: header[k]["data_offsets"][0])
        assert sorted(order) == sorted(arrays), f
        exp["files"][f] = [record(k, arrays[k]) for k in order]
        merged.update(arrays)
        assert all(index["weight_map"][k] == f for k in arrays), f
    assert set(merged) == set(state) and all(same(merged[k], state[k]) for k in state)
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        exp["config_json"] = json.load(f)
    write_json(os.path.join(d, "expected.json"), exp)


# ------------------------------------------------------------------------ logits

def gen_logits(d, state):
    """PaddleNLP's from_pretrained(case dir) and forward, as gen_paddlenlp_logits.py runs it."""
    model = LlamaForCausalLM.from_pretrained(d, dtype="float32")
    model.eval()
    sd = model.state_dict()
    assert set(sd) == set(state)
    for k, a in state.items():
        assert sd[k].numpy().tobytes() == a.tobytes(), f"from_pretrained: {k} differs"
    logits, calls = glog.forward_logits(model)
    assert list(logits.shape) == [len(glog.LOGITS_INPUT_IDS), BASE["vocab_size"]]
    assert np.all(np.isfinite(logits))
    summary, detail = glog.paths_used(model, calls)
    rel = os.path.relpath(d, ROOT)
    producer = (f"PaddleNLP {paddlenlp.__version__.replace('.post', '')} (paddlenlp.__version__ "
                f"{paddlenlp.__version__}), paddlepaddle {paddle.__version__} CPU: "
                f"LlamaForCausalLM.from_pretrained('{rel}', dtype='float32') (model_state.pdparams, "
                f"float32; every tensor loaded, equal to the file bit for bit).forward(input_ids), "
                f"eval, float32, CPU, no attention_mask (causal), position_ids default "
                f"0..{len(glog.LOGITS_INPUT_IDS) - 1}; {summary}")
    note = ("logits[i][v] for token position i, vocabulary id v; float32 values written with "
            f"Python repr. Forward details: {detail}")
    glog.write_logits(os.path.join(d, "logits.json"), producer, note, logits)


# ------------------------------------------------------------------------ main

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.parse_args()
    paddle.set_device("cpu")
    os.makedirs(OUT, exist_ok=True)
    runs = {}
    m32, opt32, loss32 = fp32_step()
    runs["fp32"] = (m32, OptState(opt32.state_dict()))
    m16, opt16, loss16 = bf16_step()
    runs["bf16"] = (m16, OptState(opt16.state_dict()))
    names = var_names(m32)
    assert names == var_names(m16), "fp32 and bf16 var names differ"
    o32, o16 = runs["fp32"][1], runs["bf16"][1]
    assert o32.master is None and o16.master is not None
    assert all(k.endswith(("_moment1_0", "_moment2_0", "_beta1_pow_acc_0", "_beta2_pow_acc_0"))
               for k in o32.tensors)
    assert all("_fp32_master_0_" in k for k in o16.tensors)
    assert all(t[0] == k for k, t in list(o32.tensors.items()) + list(o16.tensors.items()))
    assert set(o16.master) == set(names.values())
    for var, (pname, a) in o16.master.items():
        assert pname == var + "_fp32_master_0" and a.dtype == np.float32
    # bf16 parameters are the master weights cast to bfloat16
    for k, a in numpy_state(m16).items():
        assert a.dtype == np.uint16
        want = paddle.to_tensor(o16.master[names[k]][1]).astype("bfloat16").numpy()
        assert same(a, want), k
    print(f"gen_paddlenlp_reshard: loss fp32 {loss32:.6f}, fp32 copy of bf16 {loss16:.6f}")

    cfgs = {"fp32": copy.deepcopy(m32.config), "bf16": copy.deepcopy(m16.config)}
    for c in cfgs.values():
        c.architectures = ["LlamaForCausalLM"]
    want = {}
    for dtype, tp, pp in LAYOUTS:
        m, ost = runs[dtype]
        d = write_case(dtype, tp, pp, m, ost, names, cfgs[dtype], m.generation_config)
        if pp == 1 and tp > 1 and dtype == "fp32":
            check_against_convert_tensor_parallel(numpy_state(m), cfgs[dtype], tp, d, names)
        if tp == 1 and pp == 1:
            want[dtype] = pm.merge_dir(d)
            if dtype == "fp32":
                gen_logits(d, numpy_state(m))
        check_checker(d, want[dtype])
        print(f"gen_paddlenlp_reshard: {os.path.basename(d)}: {sorted(os.listdir(d))}")
    gen_unified(m32, names)
    print("versions:", versions())
    return 0


if __name__ == "__main__":
    sys.exit(main())
