#!/usr/bin/python3
"""Writes the pickle fixtures under testdata/pickle/ and the pickle fuzz seeds.

Run with the Debian python3 (numpy 1.24, torch 1.13):  /usr/bin/python3 testdata/gen/gen_pickles.py

For every fixture, testdata/pickle/expected.txt holds the value tree the reader must
build, in the canonical text form of tests/unit/value_dump.h (expanded mode), computed
here from the Python objects through their reduce protocol, independently of the pickle
bytes. Hostile inputs are crafted by hand under testdata/pickle/hostile/ with the error
they must produce.
"""
import argparse
import collections
import copyreg
import os
import pickle
import struct
import sys
import types

if os.environ.get("PYTHONHASHSEED") != "0":
    # str hashes decide set and dict layouts; fix them so the output is reproducible.
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from fixture_classes import Color, Shell  # noqa: E402

OUT = os.path.join(ROOT, "testdata", "pickle")
CORPUS_READ = os.path.join(ROOT, "tests", "fuzz", "corpora", "pickle_read")
CORPUS_ROUND_TRIP = os.path.join(ROOT, "tests", "fuzz", "corpora", "pickle_round_trip")
SEED_MAX = 4096


# ---- canonical form (see tests/unit/value_dump.h) ------------------------------------

def esc(b):
    return "".join(chr(c) if 0x20 <= c < 0x7F and c not in (0x27, 0x5C) else "\\x%02x" % c for c in b)


def minimal_le(x):
    n = (x.bit_length() >> 3) + 1
    b = x.to_bytes(n, "little", signed=True)
    while len(b) > 1 and ((b[-1] == 0 and not b[-2] & 0x80) or (b[-1] == 0xFF and b[-2] & 0x80)):
        b = b[:-1]
    return b


def global_name(obj, name=None):
    name = name or obj.__qualname__
    module = getattr(obj, "__module__", None) if name == getattr(obj, "__qualname__", None) else None
    return "g%s:%s" % (module or pickle.whichmodule(obj, name), name)


class Canon:
    def __init__(self, proto):
        self.proto = proto
        self.path = set()

    def seq(self, items, open_, close):
        return open_ + "".join(self(i) + "," for i in items) + close

    def pairs(self, items, open_):
        return open_ + "".join(self(k) + ":" + self(v) + "," for k, v in items) + "}"

    def __call__(self, x):
        t = type(x)
        if x is None:
            return "N"
        if t is bool:
            return "T" if x else "F"
        if t is int:
            return "i%d" % x if -2**63 <= x < 2**63 else "L" + minimal_le(x).hex()
        if t is float:
            return "f" + struct.pack(">d", x).hex()
        if t is str:
            return "s'%s'" % esc(x.encode("utf-8"))
        if t is bytes:
            return "b'%s'" % esc(x)
        if t is bytearray:
            return "a'%s'" % esc(bytes(x))
        if t is pickle.PickleBuffer:
            raw = x.raw()
            return ("b'%s'" if raw.readonly else "a'%s'") % esc(raw.tobytes())
        if isinstance(x, (type, types.FunctionType, types.BuiltinFunctionType)):
            return global_name(x)
        if id(x) in self.path:
            return "^"
        self.path.add(id(x))
        try:
            return self.container(x, t)
        finally:
            self.path.discard(id(x))

    def container(self, x, t):
        if t is tuple:
            return self.seq(x, "(", ")")
        if t is list:
            return self.seq(x, "[", "]")
        if t is dict:
            return self.pairs(x.items(), "{")
        if t is set:
            return self.seq(x, "S{", "}")
        if t is frozenset:
            return self.seq(x, "Z{", "}")
        reduce = copyreg.dispatch_table.get(t)
        rv = reduce(x) if reduce else x.__reduce_ex__(self.proto)
        if isinstance(rv, str):
            return global_name(x, rv)
        func, args, state, listitems, dictitems = (tuple(rv) + (None,) * 5)[:5]
        listitems = list(listitems) if listitems is not None else []
        dictitems = list(dictitems) if dictitems is not None else []
        name = getattr(func, "__name__", "")
        if func is collections.OrderedDict and args == ():
            out = "D" + self(func) + self.pairs(dictitems, "{")
            return out + ("~" + self(state) if state is not None else "")
        if self.proto >= 2 and name == "__newobj__":
            out = "O(%s|%s)" % (self(args[0]), self(tuple(args[1:])))
        elif self.proto >= 4 and name == "__newobj_ex__":
            out = "X(%s|%s|%s)" % (self(args[0]), self(args[1]), self(args[2]))
        else:
            out = "R(%s|%s)" % (self(func), self(args))
        if listitems:
            out += self.seq(listitems, "+[", "]")
        if dictitems:
            out += self.pairs(dictitems, "+{")
        if state is not None:
            out += "~" + self(state)
        return out


# ---- fixtures -----------------------------------------------------------------------

def fixtures():
    od = collections.OrderedDict([("weight", 1), ("bias", 2), ("running_mean", 3.5)])
    od._metadata = collections.OrderedDict([("", {"version": 1}), ("layer", {"version": 2})])
    shared = [1, 2]
    rec_list = []
    rec_list.append(rec_list)
    rec_dict = {}
    rec_dict["self"] = rec_dict
    dd = collections.defaultdict(list)
    dd["a"].append(1)
    all_protocols = range(6)
    binary = (2, 4)
    return [
        ("scalars", all_protocols, [None, True, False, 0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31,
                                    2**31, 2**63 - 1, -2**63, 2**64, -2**100, 1.5, -0.0, float("nan"),
                                    float("inf"), float("-inf"), 1e300, 0.1]),
        ("strings", all_protocols, ["", "ascii", "h\u00e9llo w\u00f6rld", "\u65e5\u672c\u8a9e", "\U0001f642 emoji",
                                    "quote's \"dq\" \\back\nnewline\r\x00nul\x1a", "\u00ff\u0100", "a" * 300]),
        ("bytes", all_protocols, [b"", b"abc", bytes(range(256)), b"\x00" * 300, bytearray(b"ab\xff"),
                                  bytearray()]),
        ("containers", all_protocols, {"a": [1, (2, 3), {"b": (), "c": [[]]}],
                                       "tuples": ((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)),
                                       "set": {1, 2, 3}, "frozenset": frozenset({"x"}), "empty_set": set(),
                                       "int_keys": {1: "one", -5: "minus five", 2**40: "big"},
                                       "tuple_key": {(1, 2): "pair"}, "none_key": {None: 0}}),
        ("ordered_dict", all_protocols, od),
        ("shared", all_protocols, [shared, shared, {"k": shared}, (shared,)]),
        ("recursive", all_protocols, [rec_list, rec_dict]),
        ("namespace", all_protocols, argparse.Namespace(lr=0.1, name="run", layers=[1, 2], flag=True)),
        ("numpy", all_protocols, [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(3, dtype=np.uint16),
                                  np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
                                  np.array(3.5), np.float64(1.5), np.int64(7), np.float32(2.0), np.bool_(True)]),
        ("random_state", binary, np.random.RandomState(0)),
        ("enum", all_protocols, [Color.RED, Color.GREEN, Color.RED]),
        ("shell", binary, Shell()),
        ("torch_meta", binary, [torch.Size([2, 3]), torch.float16, torch.bfloat16, torch.device("cuda", 0),
                                torch.device("cpu")]),
        ("collections", binary, [complex(1, 2), range(3), slice(1, 5, 2), collections.Counter({"a": 2}),
                                 collections.deque([1, 2]), dd]),
        ("batches", binary, {"dict": {"k%d" % i: i for i in range(1001)}, "list": list(range(2001)),
                             "set": set(range(1001))}),
    ]


# Globals outside the known set that the reader must flag, per fixture.
UNSAFE = {
    "shell": "posix:system",
    "enum": "builtins:getattr fixture_classes:Color",
}


# ---- hostile inputs -----------------------------------------------------------------

def hostile():
    set_amp = (b"\x80\x02c__builtin__\nset\nq\x01]q\x00(" + b"K\x01" * 1000 + b"e"
               + b"h\x01h\x00\x85R0" * 100 + b"N.")
    memo_chain = b"\x80\x02]q\x000" + b"]h\x00aq\x000" * 1000 + b"h\x00."
    return [
        ("marks_bomb", b"\x80\x02" + b"(" * 4096 + b".", "EFORMAT", "MARKs nested deeper than 512"),
        ("lists_bomb", b"\x80\x02" + b"]" * 1000 + b"a" * 999 + b".", "EFORMAT", "nested deeper than 512"),
        ("memo_chain", memo_chain, "EFORMAT", "nested deeper than 512"),
        ("set_amplification", set_amp, "EFORMAT", "more items than the input"),
        ("huge_binunicode", b"\x80\x02X\xff\xff\xff\xffabc.", "EFORMAT", "BINUNICODE of 4294967295 bytes"),
        ("huge_binunicode8", b"\x80\x04\x8d" + b"\xff" * 8 + b"abc.", "EFORMAT", "BINUNICODE8 of"),
        ("huge_binbytes8", b"\x80\x04\x8e" + b"\xff" * 7 + b"\x7f" + b"abc.", "EFORMAT", "BINBYTES8 of"),
        ("huge_bytearray8", b"\x80\x05\x96" + b"\x00" * 7 + b"\x01.", "EFORMAT", "BYTEARRAY8 of"),
        ("huge_long4", b"\x80\x02\x8b\xff\xff\xff\x7f\x01.", "EFORMAT", "LONG4 of"),
        ("huge_frame", b"\x80\x04\x95" + b"\xff" * 8 + b"N.", "EFORMAT", "FRAME of"),
        ("negative_binstring", b"T\xff\xff\xff\xffabc.", "EFORMAT", "negative length"),
        ("negative_long4", b"\x80\x02\x8b\xff\xff\xff\xff.", "EFORMAT", "negative length"),
        ("memo_missing", b"\x80\x02h\x05.", "EFORMAT", "memo entry 5 was never stored"),
        ("stack_underflow", b"\x80\x02a.", "EFORMAT", "stack underflow"),
        ("underflow_below_mark", b"\x80\x02](\x85.", "EFORMAT", "stack underflow"),
        ("mark_missing", b"\x80\x02]e.", "EFORMAT", "no MARK"),
        ("no_stop", b"\x80\x02N", "EFORMAT", "data ends before STOP"),
        ("stop_two_values", b"\x80\x02NN.", "EFORMAT", "STOP with 2 values"),
        ("stop_open_mark", b"\x80\x02N(.", "EFORMAT", "1 MARKs"),
        ("empty", b"", "EFORMAT", "data ends before STOP"),
        ("ext1", b"\x80\x02\x82\x01.", "EUNSUPPORTED", "EXT1"),
        ("next_buffer", b"\x80\x05\x97.", "EUNSUPPORTED", "out-of-band"),
        ("protocol_6", b"\x80\x06N.", "EUNSUPPORTED", "protocol 6"),
        ("bad_utf8", b"\x80\x04\x8c\x02\xc3\x28.", "EFORMAT", "invalid UTF-8"),
        ("overlong_utf8", b"\x80\x04\x8c\x02\xc0\xaf.", "EFORMAT", "invalid UTF-8"),
        ("surrogate", b"\x80\x04\x8c\x03\xed\xa0\x80.", "EUNSUPPORTED", "surrogate"),
        ("unicode_surrogate", b"V\\ud800\n.", "EUNSUPPORTED", "surrogate"),
        ("unknown_opcode", b"\x80\x02\xff.", "EFORMAT", "unknown opcode 0xff"),
        ("setitems_odd", b"\x80\x02}(K\x01u.", "EFORMAT", "odd number"),
        ("build_on_list", b"\x80\x02]}b.", "EFORMAT", "BUILD on a list"),
        ("append_to_tuple", b"\x80\x02)Na.", "EFORMAT", "APPEND onto a tuple"),
        ("setitem_on_list", b"\x80\x02]NNs.", "EFORMAT", "SETITEM onto a list"),
        ("additems_frozenset", b"\x80\x04(\x91(N\x90.", "EFORMAT", "ADDITEMS onto a frozenset"),
        ("reduce_non_tuple", b"\x80\x02c__builtin__\nset\n]R.", "EFORMAT", "not a tuple"),
        ("stack_global_non_str", b"\x80\x04K\x01K\x02\x93.", "EFORMAT", "STACK_GLOBAL needs two str"),
        ("global_no_newline", b"\x80\x02cos\nsys", "EFORMAT", "GLOBAL argument has no end of line"),
        ("global_nul", b"\x80\x02cos\x00x\nsystem\n.", "EFORMAT", "NUL"),
        ("int_text_long", b"I" + b"9" * 5000 + b"\n.", "EFORMAT", "4300 digits"),
        ("int_text_bad", b"I12x\n.", "EFORMAT", "malformed integer"),
        ("float_text_bad", b"F1.5.5\n.", "EFORMAT", "malformed float"),
        ("string_unquoted", b"Sabc\n.", "EFORMAT", "not quoted"),
        ("string_bad_escape", b"S'\\x4'\n.", "EFORMAT", "invalid \\x escape"),
        ("unicode_bad_escape", b"V\\u12\n.", "EFORMAT", "truncated \\u escape"),
        ("put_negative", b"Np-1\n.", "EFORMAT", "malformed memo index"),
        ("obj_without_class", b"\x80\x02(o.", "EFORMAT", "OBJ without a class"),
        ("newobj_ex_shapes", b"\x80\x04N)N\x92.", "EFORMAT", "NEWOBJ_EX needs a tuple and a dict"),
    ]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = ["# written by testdata/gen/gen_pickles.py: Python %s, numpy %s, torch %s"
             % (sys.version.split()[0], np.__version__, torch.__version__),
             "# file<TAB>unsafe globals (module:name, or -)<TAB>value tree (tests/unit/value_dump.h)"]
    seeds = []
    for name, protocols, obj in fixtures():
        for proto in protocols:
            data = pickle.dumps(obj, protocol=proto)
            fname = "%s.p%d.pkl" % (name, proto)
            write(os.path.join(OUT, fname), data)
            lines.append("%s\t%s\t%s" % (fname, UNSAFE.get(name, "-"), Canon(proto)(obj)))
            if len(data) <= SEED_MAX:
                seeds.append((fname, data))
    write(os.path.join(OUT, "expected.txt"), ("\n".join(lines) + "\n").encode())

    bad = ["# written by testdata/gen/gen_pickles.py", "# file<TAB>error code<TAB>text the message must contain"]
    for name, data, code, text in hostile():
        write(os.path.join(OUT, "hostile", name + ".pkl"), data)
        bad.append("%s.pkl\t%s\t%s" % (name, code, text))
        if len(data) <= 2 * SEED_MAX:
            seeds.append(("hostile_" + name + ".pkl", data))
    write(os.path.join(OUT, "hostile", "expected.txt"), ("\n".join(bad) + "\n").encode())

    for fname, data in seeds:
        write(os.path.join(CORPUS_READ, fname), data)
        if not fname.startswith("hostile_"):
            write(os.path.join(CORPUS_ROUND_TRIP, fname), data)


if __name__ == "__main__":
    main()
