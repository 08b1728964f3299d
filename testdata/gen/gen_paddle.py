"""Writes testdata/paddle/* with the real paddle.save.

Run with the project venv: .venv/bin/python testdata/gen/gen_paddle.py [--skip-big]
Every fixture gets testdata/paddle/expected/<name>.json: each array in the file (name by our
naming rule, the dtype ckptconv reports, shape, sha256 of its raw bytes), the pickle globals,
the top-level keys and the versions that wrote it. The split fixture is ~1 GiB, so only its
`zstd -19 --long` compression is kept (needs the zstd program).
"""

import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

warnings.simplefilter("ignore")
import paddle  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_common as gc  # noqa: E402

PADDLE_DIR = gc.out_dir("paddle")

# numpy dtype string in the file -> the dtype ckptconv reports (paddle stores bf16 as 'u2').
REPORTED_DTYPE = {
    "<f4": "float32", "<f2": "float16", "<f8": "float64", "<u2": "bfloat16",
    "|u1": "uint8", "|i1": "int8", "<i4": "int32", "<i8": "int64", "|b1": "bool",
}

BIG_NUMEL = 2**30 + 1           # one byte-sized element over paddle's split limit
BIG_SPLIT = (2**30 - 1) // 1    # paddle's MAX elements per part for 1-byte types


class Collector:
    """Arrays in a paddle file, found by walking the unpickled plain objects. Variant B2
    entries are (paddle_var_name, ndarray) tuples; their name is the key path of the array
    (tuple index 1) and the tuple's string is kept as paddle_name."""

    def __init__(self):
        self.arrays = []

    def walk(self, obj, path=""):
        if isinstance(obj, np.ndarray):
            self.arrays.append(self.record(path, obj, None))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                self.walk(v, gc.key_join(path, k))
        elif (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str)
              and isinstance(obj[1], np.ndarray)):
            self.arrays.append(self.record(gc.key_join(path, 1), obj[1], obj[0]))
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                self.walk(v, gc.key_join(path, i))

    @staticmethod
    def record(name, a, paddle_name):
        r = gc.numpy_record(name, a)
        r["numpy_dtype"] = r.pop("dtype")
        r["dtype"] = REPORTED_DTYPE[r["numpy_dtype"]]
        r["fortran_order"] = bool(a.flags.f_contiguous and not a.flags.c_contiguous)
        if paddle_name is not None:
            r["paddle_name"] = paddle_name
        return r


def paddle_versions():
    return gc.versions(paddlepaddle=paddle.__version__)


def describe(path, name, protocol, variant, extra=None):
    with open(path, "rb") as f:
        raw = f.read()
    obj = pickle.loads(raw, encoding="latin1")
    c = Collector()
    c.walk(obj)
    exp = {
        "file": name,
        "format": "pdparams",
        "pickle_protocol": protocol,
        "variant": variant,
        "versions": paddle_versions(),
        "top_keys": [str(k) for k in obj],
        "tensors": c.arrays,
        "globals": gc.pickle_globals(raw),
    }
    if extra:
        exp.update(extra)
    gc.write_json(os.path.join(PADDLE_DIR, "expected", name.split(".")[0] + ".json"), exp)
    return exp


def save(obj, name, protocol=4, variant="A"):
    path = os.path.join(PADDLE_DIR, name)
    paddle.save(obj, path, protocol=protocol)
    describe(path, name, protocol, variant)
    return path


class Tiny(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.embed = paddle.nn.Embedding(16, 8)
        self.proj = paddle.nn.Linear(8, 12)
        self.norm = paddle.nn.LayerNorm(12)
        self.head = paddle.nn.Linear(12, 16, bias_attr=False)

    def forward(self, x):
        return self.head(self.norm(self.proj(self.embed(x))))


def new_model(seed):
    """A fresh model whose paddle variable names start from embedding_0 / linear_0 again."""
    paddle.seed(seed)
    with paddle.utils.unique_name.guard():
        return Tiny()


def gen_models():
    paths = []
    m = new_model(0)
    paths.append(save(m.state_dict(), "fp32.pdparams"))
    paths.append(save(m.state_dict(), "fp32_p2.pdparams", protocol=2))
    m16 = new_model(0)
    m16.to(dtype="float16")
    paths.append(save(m16.state_dict(), "fp16.pdparams"))
    mbf = new_model(0)
    mbf.to(dtype="bfloat16")
    sd = mbf.state_dict()
    assert all(str(v.dtype) == "paddle.bfloat16" for v in sd.values())
    paths.append(save(sd, "bf16.pdparams"))
    paths.append(save(sd, "bf16_p2.pdparams", protocol=2))
    with open(paths[-1], "rb") as f:
        assert all(v.dtype == np.uint16 for k, v in pickle.load(f, encoding="latin1").items()
                   if isinstance(v, np.ndarray)), "bf16 is not stored as u2"
    return paths


def fresh_names(fn):
    """Runs fn under its own unique-name generator so optimizer variable names start at _0."""
    def run():
        with paddle.utils.unique_name.guard():
            return fn()
    return run


@fresh_names
def gen_adamw_fp32():
    """A real AdamW step on the fp32 model: accumulators plus LR_Scheduler (variant A)."""
    m = new_model(1)
    sched = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=1e-3, T_max=10)
    opt = paddle.optimizer.AdamW(learning_rate=sched, parameters=m.parameters(), weight_decay=0.01)
    loss = m(paddle.to_tensor([[1, 2, 3]])).mean()
    loss.backward()
    opt.step()
    opt.clear_grad()
    sched.step()
    return save(opt.state_dict(), "adamw_fp32.pdopt")


@fresh_names
def gen_adamw_bf16_master():
    """AdamW(multi_precision=True) over bf16 parameters: the state holds fp32 master weights
    in a nested dict, so paddle.save writes every tensor as a (var_name, ndarray) tuple
    (variant B2). Paddle's CPU build has no bf16 adamw kernel, so step() fails after the
    optimizer created its accumulators and master weights; the accumulators then get
    distinctive values so that they are not all zeros or ones."""
    m = new_model(2)
    m.to(dtype="bfloat16")
    sched = paddle.optimizer.lr.StepDecay(learning_rate=1e-3, step_size=5, gamma=0.5)
    opt = paddle.optimizer.AdamW(learning_rate=sched, parameters=m.parameters(),
                                 multi_precision=True, weight_decay=0.01)
    loss = sum((p.astype("float32") * 1.5).sum() for p in m.parameters())
    loss.backward()
    try:
        opt.step()
    except RuntimeError as e:
        if "bfloat16" not in str(e):
            raise
    sched.step()
    state = opt.state_dict()
    assert "master_weights" in state and "LR_Scheduler" in state, sorted(state)
    rng = np.random.default_rng(3)
    for k, v in state.items():
        if isinstance(v, paddle.Tensor):
            v.set_value(rng.standard_normal(v.shape).astype(np.float32))
    return save(state, "adamw_bf16_master.pdopt", variant="B2")


def gen_split_big():
    """paddle.save(protocol=2) splits a tensor over (2**30-1)//itemsize elements into parts."""
    big = np.zeros(BIG_NUMEL, dtype=np.uint8)
    big[:8] = np.arange(1, 9, dtype=np.uint8)
    big[BIG_NUMEL // 2] = 0x5A
    big[BIG_SPLIT - 4:] = np.arange(0xF0, 0xF0 + (BIG_NUMEL - BIG_SPLIT + 4), dtype=np.uint8)
    small = np.arange(6, dtype=np.float32).reshape(2, 3)
    big_sha = gc.sha256(big.data)
    name = "split_big.pdparams"
    tmp = tempfile.mkdtemp(prefix="ckpt-split-")
    try:
        raw = os.path.join(tmp, name)
        state = {"small": paddle.to_tensor(small), "big": paddle.to_tensor(big)}
        del big
        paddle.save(state, raw, protocol=2)
        del state
        with open(raw, "rb") as f:
            obj = pickle.load(f, encoding="latin1")
        info = obj["UnpackBigParamInfor@@"]["big"]
        assert [len(obj[p]) for p in info["slices"]] == [BIG_SPLIT, BIG_NUMEL - BIG_SPLIT], info
        raw_keys = list(obj)
        parts = Collector()
        parts.walk(obj)
        del obj
        with open(raw, "rb") as f:
            raw_sha = gc.sha256(f.read())
            size = f.tell()
        zst = os.path.join(PADDLE_DIR, name + ".zst")
        subprocess.run(["zstd", "-q", "-f", "-19", "--long=31", "-T2", raw, "-o", zst], check=True)
        exp = {
            "file": name,
            "compressed_file": name + ".zst",
            "decompress": "zstd -d --long=31",
            "format": "pdparams",
            "pickle_protocol": 2,
            "variant": "A",
            "versions": paddle_versions(),
            "uncompressed_size": size,
            "uncompressed_sha256": raw_sha,
            "raw_keys": raw_keys,
            "raw_arrays": parts.arrays,
            "top_keys": ["small", "big"],
            "tensors": [
                dict(Collector.record("small", small, None)),
                {"name": "big", "dtype": "uint8", "numpy_dtype": "|u1", "shape": [BIG_NUMEL],
                 "sha256": big_sha, "fortran_order": False, "split_parts": info["slices"]},
            ],
            "big_values": {"0": 1, "7": 8, str(BIG_NUMEL // 2): 0x5A,
                           str(BIG_SPLIT - 1): 0xF3, str(BIG_SPLIT): 0xF4, str(BIG_NUMEL - 1): 0xF5},
        }
        gc.write_json(os.path.join(PADDLE_DIR, "expected", "split_big.json"), exp)
        return zst
    finally:
        shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-big", action="store_true", help="do not regenerate split_big (slow, ~6 GB RAM)")
    args = ap.parse_args()
    paddle.set_device("cpu")
    paths = gen_models() + [gen_adamw_fp32(), gen_adamw_bf16_master()]
    if not args.skip_big:
        paths.append(gen_split_big())
    print("paddlepaddle", paddle.__version__, "numpy", np.__version__, "python", sys.version.split()[0])
    gc.report(paths)


if __name__ == "__main__":
    main()
