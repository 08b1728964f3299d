"""Checks for test_dcp.sh: what ckptconv read from Distributed Checkpoints, against what the
frameworks saved.

    dcp_check.py plain OUT.safetensors EXPECTED.json
        (venv: the real safetensors loader) every tensor of the plain DCP fixture, by name,
        dtype, shape and sha256, as torch.distributed.checkpoint read it back (expected.json).
    dcp_check.py megatron OUT.pt LEGACY_DIR [--optimizer]
        (torch) every tensor of a megatron-core torch_dist fixture, consolidated by ckptconv to
        OUT.pt (global shapes, a leading layer axis), equals the legacy fixture of the same
        weights bit for bit: each layer's slice against the TP-merged legacy tensor of that
        layer (local-spec names: linear_qkv.layer_norm_weight is input_layernorm.weight).
        With --optimizer also Adam's moments, against the legacy optimizer state merged
        across TP ranks the same way. Vocabulary tables padded for more ranks than the legacy
        fixture's must hold its rows, then zeros.
"""

import glob
import hashlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcore_check import load as load_megatron  # noqa: E402  (megatron.* objects stood in for)

# torch_dist keys of the local spec's norms (TransformerLayer sharded_state_dict_keys_map)
NORM_KEYS = {
    "self_attention.linear_qkv.layer_norm_weight": "input_layernorm.weight",
    "self_attention.linear_qkv.layer_norm_bias": "input_layernorm.bias",
    "mlp.linear_fc1.layer_norm_weight": "pre_mlp_layernorm.weight",
    "mlp.linear_fc1.layer_norm_bias": "pre_mlp_layernorm.bias",
}
COL = ("embedding.word_embeddings.weight", "output_layer.weight", "linear_qkv.weight", "linear_qkv.bias")
ROW = ("linear_proj.weight", "linear_fc2.weight")
FC1 = ("linear_fc1.weight", "linear_fc1.bias")
VOCAB_TABLES = ("embedding.word_embeddings.weight", "output_layer.weight")


def tensor_sha(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()


def plain(out, expected):
    from safetensors.torch import load_file

    got = load_file(out)
    want = json.load(open(expected))["tensors"]
    assert sorted(got) == sorted(w["name"] for w in want), (sorted(got), [w["name"] for w in want])
    for w in want:
        t = got[w["name"]]
        assert str(t.dtype).replace("torch.", "") == w["dtype"], (w["name"], t.dtype)
        assert list(t.shape) == w["shape"], (w["name"], t.shape)
        assert tensor_sha(t) == w["sha256"], w["name"]
    print(f"{len(want)} tensors equal what torch.distributed.checkpoint reads back")


def merge(name, parts, swiglu=True):
    if len(parts) == 1:
        return parts[0]
    if name.endswith(FC1) and swiglu:
        halves = [p.chunk(2, dim=0) for p in parts]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
    if name.endswith(COL) or name.endswith(FC1):
        return torch.cat(parts, dim=0)
    if name.endswith(ROW):
        return torch.cat(parts, dim=1)
    for p in parts[1:]:
        assert torch.equal(p, parts[0]), f"{name}: replicated tensor differs across ranks"
    return parts[0]


def legacy_ranks(legacy_dir):
    """Each rank's checkpoint, with the parameter names of its optimizer groups (recorded by
    the generator in expected.json: torch numbers the parameters)."""
    files = sorted(glob.glob(os.path.join(legacy_dir, "iter_*", "mp_rank_*", "model_optim_rng.pt")))
    assert files, legacy_dir
    ranks = []
    if os.path.exists(os.path.join(legacy_dir, "expected.json")):
        expected = json.load(open(os.path.join(legacy_dir, "expected.json")))["files"]
        for f in files:
            r = load_megatron(f)
            groups = expected[os.path.relpath(f, legacy_dir)].get("optimizer", {}).get("param_groups", [])
            r["param_names"] = [n for g in groups for n in g.get("param_names", [])]
            ranks.append(r)
        return ranks
    # a distopt fixture's legacy/ form: its expected.json (one level up) lists the names per
    # rank (rank = TP rank at PP 1 DP 1, as the mp_rank_TT files sort)
    expected = json.load(open(os.path.join(legacy_dir, "..", "expected.json")))["ranks"]
    assert len(expected) == len(files), legacy_dir
    for f, e in zip(files, expected):
        r = load_megatron(f)
        r["param_names"] = [n for g in e.get("param_names", []) for n in g]
        ranks.append(r)
    return ranks


def legacy_name(dist_key, layer):
    rest = dist_key[len("decoder.layers."):]
    return f"decoder.layers.{layer}.{NORM_KEYS.get(rest, rest)}"


def compare(got, want_of, what):
    n = 0
    for key, t in got.items():
        if "/" in key:  # common.pt state (optimizer/state/common_step), not sharded
            continue
        if key.startswith("decoder.layers."):
            for layer in range(t.shape[0]):
                w = want_of(legacy_name(key, layer))
                assert w is not None, f"{what}: no legacy tensor for {key}[{layer}]"
                assert t[layer].dtype == w.dtype and torch.equal(t[layer], w), f"{what}: {key}[{layer}] differs"
                n += 1
        else:
            w = want_of(key)
            assert w is not None, f"{what}: no legacy tensor for {key}"
            if key in VOCAB_TABLES and t.shape[0] > w.shape[0]:
                # padded for more ranks: the rows added are zeros
                assert not t[w.shape[0]:].any(), f"{what}: {key}: new padding rows are not zeros"
                t = t[:w.shape[0]]
            assert t.dtype == w.dtype and torch.equal(t, w), f"{what}: {key} differs"
            n += 1
    return n


def megatron(out, legacy_dir, optimizer):
    got = torch.load(out, map_location="cpu")
    ranks = legacy_ranks(legacy_dir)
    models = [r["model"] for r in ranks]

    def model_tensor(name):
        if name not in models[0]:
            return None
        return merge(name, [m[name] for m in models])

    weights = {k: v for k, v in got.items() if not k.startswith("optimizer.")}
    n = compare(weights, model_tensor, "weights")
    print(f"{n} weight tensors (per layer) equal the legacy fixture {os.path.basename(legacy_dir)}")
    if not optimizer:
        return
    for moment in ("exp_avg", "exp_avg_sq"):
        prefix = f"optimizer.state.{moment}."
        per_rank = []
        for r in ranks:
            # FP32Optimizer saves torch's state dict itself; the float16 ones nest it
            opt = r["optimizer"].get("optimizer", r["optimizer"])
            names = r["param_names"]
            ids = [i for g in opt["param_groups"] for i in g["params"]]
            per_rank.append({names[j]: opt["state"][ids[j]][moment] for j in range(len(ids))})

        def state_tensor(name):
            if name not in per_rank[0]:
                return None
            return merge(name, [s[name] for s in per_rank])

        moments = {k[len(prefix):]: v for k, v in got.items() if k.startswith(prefix)}
        assert moments, f"no {moment} in {out}"
        n = compare(moments, state_tensor, moment)
        print(f"{n} {moment} tensors (per layer) equal the legacy optimizer state")


if __name__ == "__main__":
    if sys.argv[1] == "plain":
        plain(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "megatron":
        megatron(sys.argv[2], sys.argv[3], "--optimizer" in sys.argv[4:])
    else:
        sys.exit(f"unknown check {sys.argv[1]}")
