"""Conversions broken on purpose, for `ckptconv verify` to catch: each writes a copy of a
checkpoint (SRC) to DST with one thing wrong, the way real converters have got it wrong.

  verify_break.py swap_heads SRC DST LAYER      Megatron: q heads 0 and 1 swapped in rank 0's
                                                linear_qkv of LAYER (global index; TP1 PP1 or TP>1 PP1)
  verify_break.py no_transpose SRC DST LAYER    PaddleNLP TE (pd2te output): LAYER's proj.weight
                                                left [in, out] (it is square, so the shape fits)
  verify_break.py swap_gate_up SRC DST LAYER    Megatron TP 2: rank 1's linear_fc1 of LAYER with its
                                                gate and up halves swapped
  verify_break.py diverge_norm SRC DST LAYER    Megatron TP 2: rank 1's copy of LAYER's input norm
                                                weight no longer equal to rank 0's
  verify_break.py naive_fc1 SRC DST LAYER       Megatron TP 2: LAYER's linear_fc1 cut as a plain
                                                chunk of [gate; up] (Megatron-LM#360)
  verify_break.py rope_permute SRC DST LAYER    Hugging Face: Meta's RoPE permutation applied to
                                                q_proj and k_proj of LAYER once more
  verify_break.py truncate_bf16 SRC DST         Hugging Face float32 -> bfloat16 by cutting the low
                                                16 bits instead of rounding to nearest even

Needs numpy, safetensors and torch (1.13 or 2.x); not paddle.
"""
import glob
import json
import os
import pickle
import shutil
import struct
import sys
import types

import numpy as np


def copy_tree(src, dst):
    shutil.copytree(src, dst)


def megatron_files(root):
    it = open(os.path.join(root, "latest_checkpointed_iteration.txt")).read().strip()
    d = os.path.join(root, "release" if it == "release" else "iter_%07d" % int(it))
    return sorted(glob.glob(os.path.join(d, "mp_rank_*", "model_optim_rng.pt")))


class Stand(object):
    """A megatron.* or transformer_engine.* object held as it was built, so that saving the
    checkpoint again writes the same construction (no Megatron needed to edit a file)."""

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj._args, obj._state = args, None
        return obj

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self._state = state

    def __reduce__(self):
        return (type(self), self._args, self._state)


def stand_class(module, name):
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    mod = sys.modules[module]
    if not hasattr(mod, name):
        setattr(mod, name, type(name, (Stand,), {"__module__": module, "__qualname__": name}))
    return getattr(mod, name)


class StandUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module.split(".")[0] in ("megatron", "transformer_engine"):
            return stand_class(module, name)
        return super().find_class(module, name)


def load_megatron(path):
    import torch
    # torch (1.13 and 2.x) subclasses pickle.Unpickler as it finds it when loading
    plain = pickle.Unpickler
    pickle.Unpickler = StandUnpickler
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    finally:
        pickle.Unpickler = plain


def edit_megatron(dst, rank, fn):
    import torch
    path = megatron_files(dst)[rank]
    ck = load_megatron(path)
    fn(ck["model"], ck["args"])
    torch.save(ck, path)


def swap_heads(src, dst, layer):
    copy_tree(src, dst)

    def edit(model, args):
        w = model["decoder.layers.%d.self_attention.linear_qkv.weight" % layer]
        d = args.kv_channels or args.hidden_size // args.num_attention_heads
        h0, h1 = w[0:d].clone(), w[d:2 * d].clone()
        w[0:d], w[d:2 * d] = h1, h0
    edit_megatron(dst, 0, edit)


def swap_gate_up(src, dst, layer):
    copy_tree(src, dst)

    def edit(model, args):
        key = "decoder.layers.%d.mlp.linear_fc1.weight" % layer
        w = model[key]
        half = w.shape[0] // 2
        model[key] = w[list(range(half, 2 * half)) + list(range(half))].clone()
    edit_megatron(dst, 1, edit)


def diverge_norm(src, dst, layer):
    copy_tree(src, dst)

    def edit(model, args):
        for key in ("decoder.layers.%d.input_layernorm.weight" % layer,
                    "decoder.layers.%d.self_attention.linear_qkv.layer_norm_weight" % layer):
            if key in model:
                model[key] = model[key] * 1.01
                return
        raise SystemExit("layer %d has no input norm weight" % layer)
    edit_megatron(dst, 1, edit)


def naive_fc1(src, dst, layer):
    import torch
    copy_tree(src, dst)
    files = megatron_files(dst)
    key = "decoder.layers.%d.mlp.linear_fc1.weight" % layer
    cks = [load_megatron(p) for p in files]
    shards = [ck["model"][key] for ck in cks]
    half = shards[0].shape[0] // 2
    gate = torch.cat([s[:half] for s in shards])
    up = torch.cat([s[half:] for s in shards])
    naive = torch.cat([gate, up]).chunk(len(shards))
    for ck, part, p in zip(cks, naive, files):
        ck["model"][key] = part.clone()
        torch.save(ck, p)


def no_transpose(src, dst, layer):
    # The file is edited in place, byte for byte: a square matrix transposed has the same
    # size, so only its data bytes change and the pickle around them stays paddle.save's.
    copy_tree(src, dst)
    key = "llama.layers.%d.transformer.self_attention.proj.weight" % layer
    for p in sorted(glob.glob(os.path.join(dst, "model_state*.pdparams"))):
        with open(p, "rb") as f:
            raw = f.read()
        sd = pickle.loads(raw)
        if key in sd:
            w = np.asarray(sd[key])
            assert w.ndim == 2 and w.shape[0] == w.shape[1], "proj.weight is not square here: %s" % (w.shape,)
            data = np.ascontiguousarray(w).tobytes()
            assert raw.count(data) == 1, "%s: the bytes of %s are not found once" % (p, key)
            with open(p, "wb") as f:
                f.write(raw.replace(data, np.ascontiguousarray(w.T).tobytes()))
            return
    raise SystemExit("%s is in no file of %s" % (key, dst))


def read_safetensors(path):
    from safetensors.numpy import load_file
    return load_file(path)


def rope_permute(src, dst, layer):
    from safetensors.numpy import save_file
    copy_tree(src, dst)
    cfg = json.load(open(os.path.join(dst, "config.json")))
    heads = {"q_proj": cfg["num_attention_heads"], "k_proj": cfg.get("num_key_value_heads") or cfg["num_attention_heads"]}
    for p in sorted(glob.glob(os.path.join(dst, "*.safetensors"))):
        t = read_safetensors(p)
        hit = False
        for proj, n in heads.items():
            key = "model.layers.%d.self_attn.%s.weight" % (layer, proj)
            if key in t:
                w = t[key]
                rows, cols = w.shape
                t[key] = np.ascontiguousarray(
                    w.reshape(n, rows // n // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols))
                hit = True
        if hit:
            save_file(t, p, metadata={"format": "pt"})


def write_bf16_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].tobytes()
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def truncate_bf16(src, dst):
    copy_tree(src, dst)
    for p in sorted(glob.glob(os.path.join(dst, "*.safetensors"))):
        t = read_safetensors(p)
        write_bf16_safetensors(p, {k: (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
                                   for k, v in t.items()})


def main():
    kind, src, dst = sys.argv[1:4]
    fn = {"swap_heads": swap_heads, "no_transpose": no_transpose, "swap_gate_up": swap_gate_up,
          "naive_fc1": naive_fc1, "diverge_norm": diverge_norm, "rope_permute": rope_permute, "truncate_bf16": truncate_bf16}[kind]
    fn(src, dst, *[int(a) for a in sys.argv[4:]])


if __name__ == "__main__":
    main()
