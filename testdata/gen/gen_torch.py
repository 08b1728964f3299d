"""Writes testdata/torch/*.pt and testdata/sample/tiny_llama.pt with the real torch.save.

Run with Debian's torch: /usr/bin/python3 testdata/gen/gen_torch.py
Every fixture gets testdata/torch/expected/<name>.json listing each tensor (name by our
naming rule, dtype, shape, stride, storage offset, storage identity, sha256 of its C-contiguous
bytes), the numpy arrays, the pickle globals and the versions that wrote it.
"""

import argparse
import collections
import io
import os
import pickle
import random
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_common as gc  # noqa: E402

TORCH_DIR = gc.out_dir("torch")
SAMPLE_DIR = os.path.join(gc.ROOT, "sample")


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def tensor_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def storage_identity(t):
    return t.storage()._storage._cdata


class Walker:
    """Collects tensors (first key path wins for an object reached twice) and numpy arrays."""

    def __init__(self):
        self.tensors = []
        self.arrays = []
        self.seen = set()
        self.storages = {}

    def walk(self, obj, path=""):
        if isinstance(obj, torch.Tensor):
            if id(obj) not in self.seen:
                self.seen.add(id(obj))
                self.tensors.append(self.record(path, obj))
        elif isinstance(obj, np.ndarray):
            if id(obj) not in self.seen:
                self.seen.add(id(obj))
                self.arrays.append(gc.numpy_record(path, obj))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                self.walk(v, gc.key_join(path, k))
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                self.walk(v, gc.key_join(path, i))

    def record(self, name, t):
        sid = self.storages.setdefault(storage_identity(t), len(self.storages))
        return {
            "name": name,
            "dtype": dtype_name(t.dtype),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "storage_offset": t.storage_offset(),
            "storage": sid,
            "storage_nbytes": t.storage().nbytes(),
            "requires_grad": bool(t.requires_grad),
            "parameter": isinstance(t, nn.Parameter),
            "sha256": gc.sha256(tensor_bytes(t)),
        }


def torch_versions():
    return gc.versions(torch=torch.__version__, python3_torch_deb=gc.deb_version("python3-torch"))


def save(obj, name, directory=TORCH_DIR, legacy=False, protocol=2, load_back=True, extra=None):
    """torch.save obj, then describe what torch.load gives back (or obj itself when loading
    it would run code)."""
    path = os.path.join(directory, name)
    kwargs = {"pickle_protocol": protocol}
    if legacy:
        kwargs["_use_new_zipfile_serialization"] = False
    torch.save(obj, path, **kwargs)
    loaded = torch.load(path, map_location="cpu") if load_back else obj
    w = Walker()
    w.walk(loaded)
    pkl = gc.legacy_pickle(path) if legacy else gc.zip_pickle(path)
    exp = {
        "file": name,
        "format": "torch-legacy" if legacy else "torch-zip",
        "pickle_protocol": protocol,
        "versions": torch_versions(),
        "top_keys": [str(k) for k in loaded] if isinstance(loaded, dict) else None,
        "tensors": w.tensors,
        "numpy_arrays": w.arrays,
        "globals": gc.pickle_globals(pkl),
    }
    if extra:
        exp.update(extra)
    gc.write_json(os.path.join(directory, "expected", name.rsplit(".", 1)[0] + ".json"), exp)
    return path


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.fc = nn.Linear(8, 6)
        self.norm = nn.LayerNorm(6)
        self.bn = nn.BatchNorm1d(6)
        self.head = nn.Linear(6, 3, bias=False)
        self.register_buffer("positions", torch.arange(4, dtype=torch.int64))


def gen_basic():
    torch.manual_seed(0)
    m = TinyNet()
    m.bn.running_mean.uniform_()
    m.bn.num_batches_tracked.fill_(7)
    return save(m.state_dict(), "basic.pt")


def gen_views():
    t = torch.arange(20, dtype=torch.float32)
    m = t.view(4, 5)
    partial_base = torch.arange(10, dtype=torch.float64) * 0.5
    sl = t[2:7]
    obj = {
        "base": t,
        "slice": sl,
        "column": m[:, 1],
        "transposed": m.t(),
        "narrow_of_transpose": m.t().narrow(1, 1, 2),
        "scalar_element": t[13],
        "alias_of_slice": sl,
        "expanded": torch.arange(3, dtype=torch.int32).expand(4, 3),
        "partial": partial_base[3:5],
    }
    assert not obj["column"].is_contiguous() and not obj["transposed"].is_contiguous()
    return save(obj, "views.pt")


def gen_scalars():
    return save({
        "zero_dim_float": torch.tensor(3.5),
        "zero_dim_int": torch.tensor(-7, dtype=torch.int64),
        "zero_dim_bf16": torch.tensor(1.5, dtype=torch.bfloat16),
        "zero_dim_bool": torch.tensor(True),
        "empty": torch.empty(0),
        "empty_3x0": torch.empty(3, 0, dtype=torch.float16),
        "bool": torch.tensor([True, False, True, True]),
    }, "scalars.pt")


def float_specials(dtype, bits_dtype, nan_payload_bits):
    fi = torch.finfo(dtype)
    vals = torch.tensor([0.0, -0.0, 1.0, -1.5, float("nan"), float("inf"), float("-inf"),
                         fi.max, -fi.max, fi.tiny, fi.tiny / 4, -fi.tiny / 2, fi.eps, 1 / 3],
                        dtype=torch.float64).to(dtype)
    payload = torch.tensor([nan_payload_bits], dtype=bits_dtype).view(dtype)
    return torch.cat([vals, payload]).reshape(3, 5)


def gen_dtypes():
    obj = collections.OrderedDict()
    obj["float64"] = float_specials(torch.float64, torch.int64, 0x7FF0000000000123)
    obj["float32"] = float_specials(torch.float32, torch.int32, 0x7FC01234)
    obj["float16"] = float_specials(torch.float16, torch.int16, 0x7E05)
    obj["bfloat16"] = float_specials(torch.bfloat16, torch.int16, 0x7FC1)
    assert obj["float32"][2, 0] == torch.finfo(torch.float32).tiny / 4  # a denormal survived
    obj["int8"] = torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8)
    obj["int16"] = torch.tensor([-32768, -1, 0, 1, 32767], dtype=torch.int16)
    obj["int32"] = torch.tensor([-2**31, -1, 0, 1, 2**31 - 1], dtype=torch.int32)
    obj["int64"] = torch.tensor([-2**63, -1, 0, 1, 2**63 - 1], dtype=torch.int64)
    obj["uint8"] = torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8)
    obj["bool"] = torch.tensor([[True, False], [False, True]])
    obj["complex64"] = torch.tensor([1 + 2j, -0.0 - 1j, complex(float("nan"), float("inf"))],
                                    dtype=torch.complex64)
    obj["complex128"] = torch.tensor([3 - 4j, 1e-310 + 0j], dtype=torch.complex128)
    return save(obj, "dtypes.pt")


def gen_params():
    torch.manual_seed(1)
    grad_leaf = torch.randn(2, 2).requires_grad_(True)
    obj = {
        "weight": nn.Parameter(torch.randn(3, 4)),
        "frozen": nn.Parameter(torch.randn(4), requires_grad=False),
        "half_param": nn.Parameter(torch.randn(2, 3).half()),
        "grad_leaf": grad_leaf,
        "nested": {
            "list": [(torch.arange(3), torch.ones(2, 2, dtype=torch.bfloat16)), 5, 2.5, "text", None],
            "tuple": (torch.zeros(1), [torch.full((2,), -1, dtype=torch.int16)]),
            "empty_list": [],
            "empty_dict": {},
        },
        "ints": [1, -2, 2**40, -2**70],
        "float": 0.1,
        "string": "hello \u00e9\u4e16",
        "none": None,
        "bools": (True, False),
        3: "int key",
    }
    return save(obj, "params.pt")


def megatron_args(**overrides):
    ns = argparse.Namespace(
        num_layers=2, hidden_size=16, ffn_hidden_size=32, num_attention_heads=2,
        num_query_groups=1, group_query_attention=True, kv_channels=8,
        seq_length=32, max_position_embeddings=32, padded_vocab_size=32,
        make_vocab_size_divisible_by=128, position_embedding_type="rope", rotary_base=10000,
        normalization="RMSNorm", norm_epsilon=1e-5, swiglu=True, add_bias_linear=False,
        untie_embeddings_and_output_weights=True, params_dtype=torch.bfloat16,
        bf16=True, fp16=False, fp8=None, transformer_impl="transformer_engine",
        tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
        virtual_pipeline_model_parallel_size=None, sequence_parallel=False,
        data_parallel_size=1, world_size=1, rank=0, micro_batch_size=2, global_batch_size=8,
        lr=3e-4, min_lr=3e-5, lr_decay_style="cosine", lr_warmup_iters=2, weight_decay=0.1,
        adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, clip_grad=1.0, loss_scale=None,
        initial_loss_scale=4294967296.0, train_iters=100, iteration=10,
        consumed_train_samples=80, consumed_valid_samples=0,
        tokenizer_type="GPT2BPETokenizer", data_path=["1.0", "data/corpus_text_document"],
        split="969,30,1", save="checkpoints/tiny", load=None, save_interval=10,
        ckpt_format="torch", use_distributed_optimizer=False, seed=1234,
        attention_dropout=0.0, hidden_dropout=0.0, init_method_std=0.02,
        recompute_granularity=None, eval_iters=1, log_interval=1,
    )
    for k, v in overrides.items():
        setattr(ns, k, v)
    return ns


def megatron_model(num_layers, hidden, ffn, heads, groups, vocab, extra_state):
    d = hidden // heads
    sd = collections.OrderedDict()
    bf = torch.bfloat16

    def w(*shape):
        return (torch.randn(*shape) * 0.02).to(bf)

    sd["embedding.word_embeddings.weight"] = w(vocab, hidden)
    for i in range(num_layers):
        p = f"decoder.layers.{i}."
        sd[p + "self_attention.linear_proj.weight"] = w(hidden, heads * d)
        if extra_state:
            sd[p + "self_attention.linear_proj._extra_state"] = extra_state(i, 0)
        sd[p + "self_attention.linear_qkv.layer_norm_weight"] = torch.ones(hidden, dtype=bf)
        sd[p + "self_attention.linear_qkv.weight"] = w((heads + 2 * groups) * d, hidden)
        if extra_state:
            sd[p + "self_attention.linear_qkv._extra_state"] = extra_state(i, 1)
            sd[p + "self_attention.core_attention._extra_state"] = extra_state(i, 2)
        sd[p + "mlp.linear_fc1.layer_norm_weight"] = torch.ones(hidden, dtype=bf)
        sd[p + "mlp.linear_fc1.weight"] = w(2 * ffn, hidden)
        if extra_state:
            sd[p + "mlp.linear_fc1._extra_state"] = extra_state(i, 3)
        sd[p + "mlp.linear_fc2.weight"] = w(hidden, ffn)
        if extra_state:
            sd[p + "mlp.linear_fc2._extra_state"] = extra_state(i, 4)
    sd["decoder.final_layernorm.weight"] = torch.ones(hidden, dtype=bf)
    sd["output_layer.weight"] = w(vocab, hidden)
    return sd


def te1_extra_state():
    """TE < 2.0: a BytesIO holding a nested torch.save archive of None."""
    b = io.BytesIO()
    torch.save(None, b)
    b.seek(0)
    return b


def te2_extra_state(layer, slot):
    """TE >= 2.0: a uint8 tensor, empty without FP8, pickled FP8 metadata otherwise."""
    if slot == 1:
        payload = pickle.dumps({"extra_fp8_variables": {"num_gemms": 1, "recipe_name": "none"}})
        return torch.frombuffer(bytearray(payload), dtype=torch.uint8).clone()
    return torch.empty(0, dtype=torch.uint8)


def gen_megatron():
    torch.manual_seed(1234)
    random.seed(1234)
    np.random.seed(1234)

    def extra_state(layer, slot):
        return te1_extra_state() if layer == 0 else te2_extra_state(layer, slot)

    model = megatron_model(2, 16, 32, 2, 1, 32, extra_state)
    params = [v for k, v in model.items() if not k.endswith("_extra_state")]
    master = [p.detach().float().clone().requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(master, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for m in master:
        m.grad = torch.randn_like(m) * 1e-3
    opt.step()
    optimizer = {
        "optimizer": opt.state_dict(),
        "grad_scaler": {"scale": torch.tensor([1.0]), "growth_tracker": 0, "hysteresis_tracker": 2},
        "fp32_from_fp16_params": [[m.detach() for m in master]],
    }
    rng = {
        "random_rng_state": random.getstate(),
        "np_rng_state": np.random.get_state(),
        "torch_rng_state": torch.get_rng_state(),
        "cuda_rng_state": torch.arange(16, dtype=torch.uint8),
        "rng_tracker_states": {},
        "np_random_state_object": np.random.RandomState(0),
        "np_seed_scalar": np.float64(0.25),
    }
    obj = {
        "args": megatron_args(),
        "checkpoint_version": 3.0,
        "iteration": 10,
        "model": model,
        "optimizer": optimizer,
        "opt_param_scheduler": {
            "max_lr": 3e-4, "lr_warmup_steps": 2, "num_steps": 80, "lr_decay_style": "cosine",
            "lr_decay_steps": 100, "min_lr": 3e-5, "start_wd": 0.1, "end_wd": 0.1,
            "wd_incr_style": "constant", "wd_incr_steps": 100,
        },
        "rng_state": [rng],
        "num_floating_point_operations_so_far": 0,
    }
    return save(obj, "megatron.pt")


def gen_proto4():
    torch.manual_seed(4)
    w = torch.randn(4, 4)
    return save({
        "weight": w,
        "weight_t": w.t(),
        "half": torch.randn(3).half(),
        "bf16": torch.randn(2, 3).to(torch.bfloat16),
        "meta": {
            "name": "proto4",
            "long_string": "x" * 300,
            "raw": b"\x00\xff\x80 bytes",
            "ints": {1, 2, 3},
            "frozen": frozenset({4, 5}),
            "tuple": (1, 2.5, None, True),
        },
    }, "proto4.pt", protocol=4)


def gen_legacy():
    a = torch.arange(10, dtype=torch.float32)
    return save({
        "a": a,
        "a_view": a[2:5],
        "b": torch.tensor([[1, 2], [3, 4]], dtype=torch.int64),
        "h": torch.tensor([0.5, -2.0], dtype=torch.float16),
    }, "legacy.pt", legacy=True)


def gen_big_names():
    sd = collections.OrderedDict()
    for i in range(150):
        sd[f"layers.{i}.attention.weight"] = torch.full((2,), float(i))
        sd[f"layers.{i}.norm.scale"] = torch.full((1,), i, dtype=torch.int16)
    sd["final.weight"] = torch.zeros(3)
    return save(sd, "big_names.pt")


class SystemCall:
    """Pickles as a call of os.system; pickling never runs it, only unpickling would."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def gen_unsafe():
    torch.manual_seed(5)
    obj = {
        "model": collections.OrderedDict(weight=torch.randn(2, 2)),
        "extra": {"hook": SystemCall()},
    }
    bad = f"{os.system.__module__}.{os.system.__name__}"
    return save(obj, "unsafe_os_system.pt", load_back=False,
                extra={"unsafe_globals": [{"global": bad, "path": "extra/hook"}]})


def gen_sample():
    torch.manual_seed(42)
    hidden, heads, groups, ffn, vocab, layers = 64, 4, 2, 128, 128, 2

    def empty_extra_state(layer, slot):
        return torch.empty(0, dtype=torch.uint8)

    obj = {
        "args": megatron_args(num_layers=layers, hidden_size=hidden, ffn_hidden_size=ffn,
                              num_attention_heads=heads, num_query_groups=groups,
                              kv_channels=hidden // heads, padded_vocab_size=vocab,
                              seq_length=128, max_position_embeddings=128),
        "checkpoint_version": 3.0,
        "iteration": 1,
        "model": megatron_model(layers, hidden, ffn, heads, groups, vocab, empty_extra_state),
        "num_floating_point_operations_so_far": 0,
    }
    os.makedirs(os.path.join(SAMPLE_DIR, "expected"), exist_ok=True)
    return save(obj, "tiny_llama.pt", directory=SAMPLE_DIR)


def main():
    paths = [gen_basic(), gen_views(), gen_scalars(), gen_dtypes(), gen_params(), gen_megatron(),
             gen_proto4(), gen_legacy(), gen_big_names(), gen_unsafe(), gen_sample()]
    print("torch", torch.__version__, "(python3-torch", gc.deb_version("python3-torch") + ")",
          "numpy", np.__version__, "python", sys.version.split()[0])
    gc.report(paths)


if __name__ == "__main__":
    main()
