"""te_grouped.py IN OUT [--impl transformer_engine] [--break shape|fp8]: the legacy
Megatron set IN (SequentialMLP experts) rewritten as megatron-core's TEGroupedMLP would save
it (--moe-grouped-gemm with Transformer Engine), written independently of ckptconv with
torch: per MoE layer and linear, weight<i> (and bias<i>) of each local expert i in turn, then
ONE _extra_state, local expert 0's (transformer/moe/experts.py TEGroupedMLP,
extensions/transformer_engine.py TEGroupedLinear, Transformer Engine's GroupedLinear
parameter registration), args.moe_grouped_gemm True. --impl also sets args.transformer_impl.
--break spoils mp_rank_00_001's layer 0: shape cuts a row off linear_fc1.weight1, fp8 gives
linear_fc1._extra_state a byte of state. megatron-core's classes in args are
stood in for (Stub)."""
import importlib.abc
import importlib.machinery
import os
import re
import shutil
import sys
import types
from collections import OrderedDict

import torch


class Stub:
    """A megatron class a rank file names (enums in args), pickled back as it came."""

    def __init__(self, *args):
        self.args = args

    def __reduce__(self):
        return type(self), self.args


class StubModule(types.ModuleType):
    def __getattr__(self, name):
        cls = type(name, (Stub,), {"__module__": self.__name__, "__qualname__": name})
        setattr(self, name, cls)
        return cls


class Megatron(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """megatron.* as stub modules: megatron-core is not needed to rewrite a rank file."""

    def find_spec(self, name, path, target=None):
        if name == "megatron" or name.startswith("megatron."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return StubModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.append(Megatron())

EXPERT = re.compile(r"^(.*\.mlp\.experts\.)local_experts\.(\d+)\.(linear_fc[12])\.(weight|bias|_extra_state)$")


def grouped(model):
    """The model dict with each layer's SequentialMLP experts as TEGroupedMLP's keys."""
    out, done = OrderedDict(), set()
    for key in model:
        m = EXPERT.match(key)
        if not m:
            out[key] = model[key]
            continue
        prefix = m.group(1)
        if prefix in done:
            continue
        done.add(prefix)
        experts = {}
        for k, v in model.items():
            e = EXPERT.match(k)
            if e and e.group(1) == prefix:
                experts.setdefault(e.group(3), {}).setdefault(int(e.group(2)), {})[e.group(4)] = v
        for linear, per in experts.items():  # linear_fc1 first: the order of the source
            for i in range(len(per)):
                for param in ("weight", "bias"):
                    if param in per[i]:
                        out[f"{prefix}{linear}.{param}{i}"] = per[i][param]
            if "_extra_state" in per[0]:
                out[f"{prefix}{linear}._extra_state"] = per[0]["_extra_state"]
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    opts = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    shutil.copytree(src, dst)
    for root, _, files in os.walk(dst):
        for f in files:
            if f != "model_optim_rng.pt":
                continue
            path = os.path.join(root, f)
            sd = torch.load(path, map_location="cpu")
            sd["model"] = grouped(sd["model"])
            sd["args"].moe_grouped_gemm = True
            if "--impl" in opts:
                sd["args"].transformer_impl = opts["--impl"]
            how = opts.get("--break")
            if how and os.path.basename(root) == "mp_rank_00_001":
                w = "decoder.layers.0.mlp.experts.linear_fc1.weight1"
                if how == "shape":
                    sd["model"][w] = sd["model"][w][1:].clone()
                elif how == "fp8":
                    sd["model"]["decoder.layers.0.mlp.experts.linear_fc1._extra_state"] = torch.ones(1, dtype=torch.uint8)
            torch.save(sd, path)


main()
