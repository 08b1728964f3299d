"""set_args.py COMMON_PT NAME=VALUE...: set attributes of the args Namespace in a Megatron
common.pt (a torch.save zip) in place; VALUE is a Python literal. The standard library only:
classes the pickle names (megatron enums, torch rebuild functions) are stood in for by stubs
that pickle back to the same globals, and storages keep their persistent ids."""
import ast
import io
import pickle
import sys
import types
import zipfile

path, sets = sys.argv[1], sys.argv[2:]


class Stub:
    def __init__(self, *args):
        self.args = args

    def __reduce__(self):
        return (type(self), self.args, self.__dict__ or None)


class Pid:
    def __init__(self, pid):
        self.pid = pid


def stub(module, name):
    mod = sys.modules.get(module)
    if mod is None or isinstance(mod, types.ModuleType) and getattr(mod, "__stub__", False):
        if mod is None:
            parts = module.split(".")
            for k in range(1, len(parts) + 1):
                name_k = ".".join(parts[:k])
                if name_k not in sys.modules:
                    m = types.ModuleType(name_k)
                    m.__stub__ = True
                    sys.modules[name_k] = m
                    if k > 1:
                        setattr(sys.modules[".".join(parts[:k - 1])], parts[k - 1], m)
            mod = sys.modules[module]
        if not hasattr(mod, name):
            setattr(mod, name, type(name, (Stub,), {"__module__": module, "__qualname__": name}))
        return getattr(mod, name)
    return None


class Reader(pickle.Unpickler):
    def find_class(self, module, name):
        if module in ("argparse", "builtins", "collections", "copyreg", "_codecs"):
            return super().find_class(module, name)
        return stub(module, name)

    def persistent_load(self, pid):
        return Pid(pid)


class Writer(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Pid) else None


with zipfile.ZipFile(path) as z:
    entries = [(i, z.read(i.filename)) for i in z.infolist()]
pkl = next(n for n, (i, _) in enumerate(entries) if i.filename.endswith("/data.pkl"))
root = Reader(io.BytesIO(entries[pkl][1])).load()
for s in sets:
    name, value = s.split("=", 1)
    setattr(root["args"], name, ast.literal_eval(value))
out = io.BytesIO()
Writer(out, protocol=2).dump(root)
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    for n, (info, data) in enumerate(entries):
        z.writestr(info.filename, out.getvalue() if n == pkl else data)
