"""Shared by the reshard benchmark scripts (make_megatron_bench.py, reshard_python.py,
reshard_compare.py): reading and writing Megatron-LM legacy checkpoints with plain torch.

- `load(path)`: torch.load of a model_optim_rng.pt without Megatron installed. Megatron's
  `args` hold a few of its own objects (enums such as AttnBackend and ModelType); classes of
  modules that do not import (megatron, transformer_engine, ...) are replaced by stand-ins
  that remember how they were built and pickle back to the same global and arguments, so a
  torch.save of a loaded file writes them unchanged.
- Megatron's fp32 master copies are pickled with Python attributes, which torch 1.13 drops
  when loading; `load` keeps them (`StateTensor`, `state_of`) and `save` writes them back.
- `rank_files(root)`: the tracker, the iteration directory and {(tp, pp): path}.
- The tensor-parallel rules of megatron.md: `split_kind`, `tp_merge`, `tp_split`;
  vocabulary padding `padded_vocab`; layer offsets; parameter order and the weight-decay
  split Megatron's optimizer uses.
"""

import copyreg
import importlib.abc
import importlib.machinery
import os
import re
import sys
import types

import torch

# Top-level packages whose classes may appear in a checkpoint's pickle without being installed.
STUB_ROOTS = ("megatron", "transformer_engine", "apex", "modelopt", "nvidia_resiliency_ext")


class Stub:
    """Stand-in for a class from a module that is not installed.

    Built either by a call (pickle REDUCE, e.g. an Enum: `AttnBackend(5)`) or by `cls.__new__`
    plus `__setstate__` (NEWOBJ + BUILD); `__reduce_ex__` gives back the same form."""

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.__dict__["_stub_args"] = args
        obj.__dict__["_stub_called"] = False
        obj.__dict__["_stub_state"] = None
        return obj

    def __init__(self, *args, **kwargs):
        self.__dict__["_stub_called"] = True

    def __setstate__(self, state):
        self.__dict__["_stub_state"] = state

    def __reduce_ex__(self, protocol):
        d = self.__dict__
        if d["_stub_called"]:
            return (type(self), d["_stub_args"], d["_stub_state"])
        return (copyreg.__newobj__, (type(self),) + d["_stub_args"], d["_stub_state"])

    def _stub_key(self):
        d = self.__dict__
        return (type(self).__module__, type(self).__qualname__, d["_stub_args"], d["_stub_called"],
                repr(d["_stub_state"]))

    def __eq__(self, other):
        return isinstance(other, Stub) and self._stub_key() == other._stub_key()

    def __hash__(self):
        return hash(self._stub_key())

    def __repr__(self):
        d = self.__dict__
        args = ", ".join(repr(a) for a in d["_stub_args"])
        st = "" if d["_stub_state"] is None else f" state={d['_stub_state']!r}"
        return f"{type(self).__module__}.{type(self).__qualname__}({args}){st}"


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        cls = type(name, (Stub,), {"__module__": self.__name__, "__qualname__": name})
        setattr(self, name, cls)
        return cls


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUB_ROOTS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


def _install_stubs():
    # appended last: an installed package of the same name is found first
    if not any(isinstance(f, _StubFinder) for f in sys.meta_path):
        sys.meta_path.append(_StubFinder())


_install_stubs()


class StateTensor(torch.Tensor):
    """A tensor with Python attributes as torch >= 2 pickles it:
    `torch._tensor._rebuild_from_type_v2(_rebuild_tensor_v2, torch.Tensor, args, state)`.
    Megatron's fp32 master copies (fp32_from_fp16_params) are saved this way, with
    {'tensor_model_parallel', 'partition_dim', 'partition_stride', ...}. torch 1.13 drops the
    state when loading such a tensor; `load` keeps it here (`ckpt_state`) and `save` writes the
    same form back."""

    ckpt_state = None

    def __reduce_ex__(self, protocol):
        func, args = torch.Tensor._reduce_ex_internal(self, protocol)
        if self.ckpt_state is None:
            return func, args
        return torch._tensor._rebuild_from_type_v2, (func, torch.Tensor, args, self.ckpt_state)


def with_state(t, state):
    """t (contiguous, own storage) as a StateTensor carrying state (None: a plain tensor)."""
    if state is None:
        return t.as_subclass(torch.Tensor) if type(t) is not torch.Tensor else t
    s = t.as_subclass(StateTensor)
    s.ckpt_state = state
    return s


def state_of(t):
    return getattr(t, "ckpt_state", None) if isinstance(t, StateTensor) else None


def plain(t):
    return t.as_subclass(torch.Tensor) if type(t) is not torch.Tensor else t


_torch_rebuild_from_type_v2 = torch._tensor._rebuild_from_type_v2


def _rebuild_from_type_v2(func, new_type, args, state):
    t = _torch_rebuild_from_type_v2(func, new_type, args, state)
    if new_type is torch.Tensor and state:
        t = with_state(t, state)
    return t


# pickled under torch's name, so files written here name torch._tensor._rebuild_from_type_v2
_rebuild_from_type_v2.__module__ = "torch._tensor"
torch._tensor._rebuild_from_type_v2 = _rebuild_from_type_v2


def load(path):
    return torch.load(path, map_location="cpu")


def save(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------
# Directory layout (megatron.md §1)

RANK_DIR = re.compile(r"mp_rank_(\d\d)(?:_(\d\d\d))?")


def rank_files(root):
    """(tracker text, iteration dir name, {(tp, pp): path of model_optim_rng.pt})."""
    with open(os.path.join(root, "latest_checkpointed_iteration.txt")) as f:
        tracker = f.read()
    it = tracker.strip()
    sub = "release" if it == "release" else f"iter_{int(it):07d}"
    d = os.path.join(root, sub)
    files = {}
    for name in sorted(os.listdir(d)):
        m = RANK_DIR.fullmatch(name)
        if not m:
            raise SystemExit(f"{d}: unexpected entry {name} (expert-parallel checkpoints are not handled here)")
        files[(int(m.group(1)), int(m.group(2) or 0))] = os.path.join(d, name, "model_optim_rng.pt")
    if not files:
        raise SystemExit(f"{d}: no mp_rank_* directories")
    return tracker, sub, files


RANK_DIR_EXPERT = re.compile(r"mp_rank_\d\d(?:_\d\d\d){0,2}")


def rank_dirs(root):
    """(tracker text, iteration dir name, {rank directory name: path of model_optim_rng.pt}), expert-
    parallel directories (mp_rank_TT[_PPP][_EEE]) included: the names alone do not say whether a
    single suffix is the pipeline or the expert rank, so they are kept as names."""
    with open(os.path.join(root, "latest_checkpointed_iteration.txt")) as f:
        tracker = f.read()
    it = tracker.strip()
    sub = "release" if it == "release" else f"iter_{int(it):07d}"
    d = os.path.join(root, sub)
    files = {name: os.path.join(d, name, "model_optim_rng.pt") for name in sorted(os.listdir(d))
             if RANK_DIR_EXPERT.fullmatch(name)}
    if not files:
        raise SystemExit(f"{d}: no mp_rank_* directories")
    return tracker, sub, files


def rank_dir(tp_rank, pp_rank, pp):
    return f"mp_rank_{tp_rank:02d}" if pp == 1 else f"mp_rank_{tp_rank:02d}_{pp_rank:03d}"


# ----------------------------------------------------------------------------------------------
# Tensor-parallel rules (megatron.md §3, §4)

VOCAB = ("embedding.word_embeddings.weight", "output_layer.weight")
COLUMN = ("self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias")  # per-group contiguous
FC1 = ("mlp.linear_fc1.weight", "mlp.linear_fc1.bias")  # [gate_r; up_r] per rank with SwiGLU
ROW = ("self_attention.linear_proj.weight", "mlp.linear_fc2.weight")
REPLICATED = ("layernorm.weight", "layernorm.bias", "layer_norm_weight", "layer_norm_bias",
              "final_layernorm.weight", "final_layernorm.bias", "linear_proj.bias", "linear_fc2.bias",
              "embedding.position_embeddings.weight")


def split_kind(name, swiglu):
    """'vocab', 'col', 'fc1' (SwiGLU), 'row' or 'rep' for a (local or global) state-dict key."""
    if name.endswith(VOCAB):
        return "vocab"
    if name.endswith(FC1):
        return "fc1" if swiglu else "col"
    if name.endswith(COLUMN):
        return "col"
    if name.endswith(ROW):
        return "row"
    if name.endswith(REPLICATED):
        return "rep"
    raise SystemExit(f"{name}: no tensor-parallel rule for this parameter")


def tp_merge(name, kind, parts):
    if kind == "rep":
        for t, p in enumerate(parts[1:], 1):
            if not torch.equal(p, parts[0]):
                raise SystemExit(f"{name}: replicated on every TP rank, but rank {t} differs from rank 0")
        return parts[0]
    if kind == "row":
        return torch.cat(parts, dim=1)
    if kind == "fc1":
        halves = [p.chunk(2, dim=0) for p in parts]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
    return torch.cat(parts, dim=0)  # col, vocab


def tp_split(name, kind, full, tp):
    """The TP parts of a full tensor, each contiguous and owning its storage."""
    if kind == "rep":
        return [full.clone() for _ in range(tp)]
    if kind == "row":
        if full.shape[1] % tp:
            raise SystemExit(f"{name}: {full.shape[1]} columns do not split over {tp} ranks")
        return [c.contiguous().clone() for c in full.chunk(tp, dim=1)]
    if full.shape[0] % (2 * tp if kind == "fc1" else tp):
        raise SystemExit(f"{name}: {full.shape[0]} rows do not split over {tp} ranks")
    if kind == "fc1":
        gate, up = full.chunk(2, dim=0)
        return [torch.cat([g, u], dim=0) for g, u in zip(gate.chunk(tp, dim=0), up.chunk(tp, dim=0))]
    return [c.clone() for c in full.chunk(tp, dim=0)]


def padded_vocab(true_vocab, divisible_by, tp):
    """megatron.md §4.3: Vp = ceil(V / (div * TP)) * div * TP."""
    m = divisible_by * tp
    return (true_vocab + m - 1) // m * m


def true_vocab_size(args):
    """Rows that are not padding, as far as args tell: the NullTokenizer has vocab_size + 1
    tokens (its EOD is id vocab_size); other tokenizers are not recorded in args (None)."""
    v = getattr(args, "vocab_size", None)
    if v is None:
        return None
    if getattr(args, "tokenizer_type", None) == "NullTokenizer":
        return v + 1
    return v


# ----------------------------------------------------------------------------------------------
# Pipeline layout (megatron.md §5)

LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")


def with_layer(key, layer):
    return LAYER.sub(f"decoder.layers.{layer}.", key, count=1)


def layer_of(key):
    m = LAYER.match(key)
    return int(m.group(1)) if m else None


def chunk_offset(num_layers, pp, vp, pp_rank, vp_rank):
    """First global layer of chunk (pp_rank, vp_rank), even split."""
    return vp_rank * (num_layers // vp) + pp_rank * (num_layers // (pp * vp))


def model_chunks(sd):
    """[(top-level key, OrderedDict)] of one rank file: 'model' or 'model0', 'model1', ..."""
    if "model" in sd:
        return [("model", sd["model"])]
    out = []
    i = 0
    while f"model{i}" in sd:
        out.append((f"model{i}", sd[f"model{i}"]))
        i += 1
    return out


# ----------------------------------------------------------------------------------------------
# Optimizer (megatron/core/optimizer/__init__.py _get_param_groups, standard overrides)


def parameter_names(chunks):
    """named_parameters() order of a rank's model chunks: the state-dict tensors, without
    `_extra_state` entries, chunk after chunk ('model1/...' for later chunks when there are
    several)."""
    names = []
    for ci, (_, msd) in enumerate(chunks):
        for k, v in msd.items():
            if k.endswith("._extra_state") or not isinstance(v, torch.Tensor):
                continue
            names.append((k if len(chunks) == 1 else f"model{ci}/{k}", ci, k))
    return names


def no_weight_decay(key, tensor):
    """Megatron's standard override: `*.bias` or 1-D parameters get wd_mult 0."""
    return key.endswith(".bias") or tensor.dim() == 1


def group_is_no_wd(group):
    if "wd_mult" in group:
        return group["wd_mult"] == 0.0
    return group.get("weight_decay", None) == 0.0


def split_optimizer(opt):
    """(inner torch optimizer state dict, fp32 master groups or None, wrapper dict or None)."""
    if isinstance(opt, list):
        raise SystemExit("optimizer: a ChainedOptimizer of several optimizers is not handled here")
    if "fp32_from_fp16_params" in opt:
        return opt["optimizer"], opt["fp32_from_fp16_params"], opt
    if "state" in opt and "param_groups" in opt:
        return opt, None, None
    raise SystemExit(f"optimizer: unexpected keys {list(opt)} (a distributed optimizer's state lives in "
                     "distrib_optim.pt and is not handled here)")


def assign_groups(param_list, groups):
    """param_list: [(name, tensor)] in named_parameters() order. Returns [[names of group g]],
    following the groups' weight-decay flags (group order as in the file)."""
    flags = [group_is_no_wd(g) for g in groups]
    if len(groups) > 2 or len(set(flags)) != len(flags):
        raise SystemExit(f"optimizer: {len(groups)} param groups that are not Megatron's weight-decay split")
    out = [[] for _ in groups]
    for name, t in param_list:
        nwd = no_weight_decay(name, t)
        if nwd not in flags:
            raise SystemExit(f"optimizer: no param group for {name} (no weight decay: {nwd})")
        out[flags.index(nwd)].append(name)
    return out

