"""add_pdparams_tensor.py FILE KEY NEW: add to the .pdparams pickle FILE a tensor NEW holding what
KEY holds, with the standard library only (no numpy): the opcodes of KEY's entry are copied to
the end of the top-level dict, without their memo stores (later memo indices stay as they are),
and the frames are left out (a reader takes protocol 4 without them)."""
import pickle
import pickletools
import sys

path, key, new = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(path, "rb").read()


class Stub:
    def __init__(self, *args):
        pass

    def __setstate__(self, state):
        pass


class Keys(pickle.Unpickler):
    def find_class(self, module, name):
        return Stub


keys = list(Keys(open(path, "rb")).load())
nxt = keys[keys.index(key) + 1] if keys.index(key) + 1 < len(keys) else None
ops = [(op.name, arg, pos) for op, arg, pos in pickletools.genops(data)]
ends = [p for _, _, p in ops[1:]] + [len(data)]
start = next(i for i, (n, a, _) in enumerate(ops) if n == "SHORT_BINUNICODE" and a == key)
if nxt is None:
    stop = max(i for i, (n, _, _) in enumerate(ops) if n == "SETITEMS")
else:
    stop = next(i for i, (n, a, _) in enumerate(ops) if n == "SHORT_BINUNICODE" and a == nxt)
last = max(i for i, (n, _, _) in enumerate(ops) if n == "SETITEMS")
name = new.encode()
copy = b"\x8c" + bytes([len(name)]) + name
copy += b"".join(data[ops[i][2]:ends[i]] for i in range(start + 1, stop) if ops[i][0] != "MEMOIZE")
out = b""
for i, (n, _, pos) in enumerate(ops):
    if i == last:
        out += copy
    if n != "FRAME":
        out += data[pos:ends[i]]
open(path, "wb").write(out)
