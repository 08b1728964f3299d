"""Writes testdata/bad/*: small malformed or hostile inputs that every reader must refuse
with an error (never a crash, a hang, an unbounded allocation or code execution).

Plain Python, no framework: run after gen_torch.py and gen_paddle.py, whose fixtures some of
these start from. testdata/bad/MANIFEST.json says what is wrong with each file.

Torch-style pickles are written by the standard pickler against stand-in modules named
`torch` and `torch._utils`, so that GLOBAL opcodes name the real torch functions without
importing torch. Nothing here is ever unpickled.
"""

import io
import os
import pickle
import struct
import sys
import types
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_common as gc  # noqa: E402

BAD_DIR = os.path.join(gc.ROOT, "bad")
# The code payloads create this file in the current directory: tests look for it.
CANARY = "PAYLOAD_RAN"
TORCH_DIR = os.path.join(gc.ROOT, "torch")
PADDLE_DIR = os.path.join(gc.ROOT, "paddle")


def _stand_in(module, name, obj):
    mod = sys.modules.get(module)
    if mod is None:
        mod = sys.modules[module] = types.ModuleType(module)
    obj.__module__ = module
    obj.__qualname__ = name
    obj.__name__ = name
    setattr(mod, name, obj)
    return obj


def _rebuild_tensor_v2(*args):
    raise AssertionError("never called")


class FloatStorage:
    pass


_stand_in("torch", "FloatStorage", FloatStorage)
sys.modules["torch"]._utils = sys.modules.setdefault("torch._utils", types.ModuleType("torch._utils"))
_stand_in("torch._utils", "_rebuild_tensor_v2", _rebuild_tensor_v2)


class StorageRef:
    def __init__(self, key, numel):
        self.key, self.numel = key, numel


class TensorRef:
    """Pickles as torch does: _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, __import__("collections").OrderedDict())

    def __reduce__(self):
        return (_rebuild_tensor_v2, self.args)


class Call:
    """Pickles as a call of `func(*args)`; func is any importable stand-in or real function."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, StorageRef):
            return ("storage", FloatStorage, obj.key, "cpu", obj.numel)
        return None


def torch_pickle(obj, protocol=2):
    b = io.BytesIO()
    TorchPickler(b, protocol=protocol).dump(obj)
    return b.getvalue()


def torch_zip(path, pkl, records=(), archive="archive"):
    """A torch-style zip: <archive>/data.pkl, the given data records, <archive>/version."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{archive}/data.pkl", pkl)
        for name, data in records:
            z.writestr(f"{archive}/{name}", data)
        z.writestr(f"{archive}/version", "3\n")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(name, data):
    path = os.path.join(BAD_DIR, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def data_offset(zbytes, info):
    """Offset of a zip member's data, from its local header (extra lengths differ from the CD)."""
    hdr = zbytes[info.header_offset:info.header_offset + 30]
    name_len, extra_len = struct.unpack("<HH", hdr[26:30])
    return info.header_offset + 30 + name_len + extra_len


def floats(*vals):
    return struct.pack(f"<{len(vals)}f", *vals)


def gen():
    os.makedirs(BAD_DIR, exist_ok=True)
    manifest = {}
    paths = []

    def add(name, data, defect, expect):
        paths.append(write(name, data))
        manifest[name] = {"defect": defect, "error_mentions": expect}  # None: only the file name is certain

    basic = read(os.path.join(TORCH_DIR, "basic.pt"))
    add("truncated.pt", basic[:len(basic) // 2],
        "basic.pt cut in the middle: no central directory", None)

    zf = zipfile.ZipFile(io.BytesIO(basic))
    infos = [i for i in zf.infolist() if "/data/" in i.filename and i.file_size >= 16]
    victim = max(infos, key=lambda i: i.file_size)
    flipped = bytearray(basic)
    flipped[data_offset(basic, victim) + victim.file_size // 2] ^= 0x40
    add("bad_crc.pt", bytes(flipped),
        f"one data byte of {victim.filename} flipped, CRC-32 left as written", victim.filename.split("/", 1)[1])

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for i in zf.infolist():
            data = zf.read(i.filename)
            if i.filename == victim.filename:
                data = data[:-4]
            z.writestr(i.filename, data)
    add("short_storage.pt", out.getvalue(),
        f"{victim.filename} is 4 bytes shorter than numel*itemsize in data.pkl", victim.filename.split("/", 1)[1])

    st = StorageRef("0", 4)
    add("offset_out_of_range.pt",
        _zip_bytes(torch_pickle({"w": TensorRef(st, 2, [4], [1])}), [("data/0", floats(1, 2, 3, 4))]),
        "tensor w: storage_offset 2 + 4 elements exceeds the 4-element storage", "w")
    add("stride_out_of_range.pt",
        _zip_bytes(torch_pickle({"w": TensorRef(st, 0, [2, 2], [3, 1])}), [("data/0", floats(1, 2, 3, 4))]),
        "tensor w: shape (2,2) stride (3,1) reaches element 4 of a 4-element storage", "w")
    add("missing_storage.pt",
        _zip_bytes(torch_pickle({"w": TensorRef(StorageRef("7", 4), 0, [4], [1])}), []),
        "tensor w refers to storage record data/7, which the archive lacks", "data/7")

    evil = {"state": {"weight": TensorRef(st, 0, [4], [1]),
                      "hook": Call(eval, (f"__import__('os').system('touch {CANARY}')",))}}
    add("unsafe.pt", _zip_bytes(torch_pickle(evil), [("data/0", floats(1, 2, 3, 4))]),
        "state/hook is builtins.eval(...) (GLOBAL, protocol 2)", "state/hook")
    evil4 = {"state": {"weight": TensorRef(st, 0, [4], [1]),
                       "hook": Call(os.system, (f"touch {CANARY}",))}}
    add("unsafe_p4.pt", _zip_bytes(torch_pickle(evil4, protocol=4), [("data/0", floats(1, 2, 3, 4))]),
        f"state/hook is {os.system.__module__}.system(...) via STACK_GLOBAL (protocol 4)", "state/hook")

    depth = 10000  # far past the reader's 512 levels, at a tenth of the bytes
    bomb = b"\x80\x02" + b"(]" * depth + b"e" * depth + b"."
    add("recursion_bomb.pt", _zip_bytes(bomb, []),
        f"data.pkl nests {depth} lists (MARK EMPTY_LIST ... APPENDS)", None)

    huge = b"\x80\x02}X" + struct.pack("<I", 0xFFFFFFFF) + b"abc"
    add("huge_length.pt", _zip_bytes(huge, []),
        "data.pkl: BINUNICODE with length 0xFFFFFFFF and 3 bytes left", None)

    memo = b"\x80\x02}r" + struct.pack("<I", 0xFFFFFFF0) + b"j" + struct.pack("<I", 0x7FFFFFFF) + b"."
    add("bad_memo.pt", _zip_bytes(memo, []),
        "data.pkl: LONG_BINPUT to index 0xFFFFFFF0, LONG_BINGET of an index never put", None)

    add("not_a_checkpoint.txt", b"This is a plain text file, not a checkpoint.\n",
        "plain text", "unrecognized checkpoint format")

    add("huge_header.safetensors", struct.pack("<Q", 1 << 63) + b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
        "safetensors header length N = 2^63", None)

    fp32 = read(os.path.join(PADDLE_DIR, "fp32.pdparams"))
    add("truncated.pdparams", fp32[:len(fp32) * 2 // 3],
        "fp32.pdparams cut in the middle of the pickle stream", None)

    gc.write_json(os.path.join(BAD_DIR, "MANIFEST.json"), manifest)
    gc.report(paths)


def _zip_bytes(pkl, records):
    b = io.BytesIO()
    torch_zip(b, pkl, records)
    return b.getvalue()


if __name__ == "__main__":
    gen()
