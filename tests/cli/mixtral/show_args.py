"""show_args.py RANK_FILE NAME...: print args.NAME of the args Namespace in a Megatron rank file
(a torch.save zip), one `NAME: repr` a line (`NAME: -` when absent). The standard library only:
the classes the pickle names are stood in for by stubs and storages are not read."""
import io
import pickle
import sys
import zipfile


class Stub:
    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


class Reader(pickle.Unpickler):
    def find_class(self, module, name):
        if module in ("argparse", "builtins", "collections", "copyreg", "_codecs"):
            return super().find_class(module, name)
        return type(name, (Stub,), {})

    def persistent_load(self, pid):
        return None


path, names = sys.argv[1], sys.argv[2:]
with zipfile.ZipFile(path) as z:
    data = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
args = vars(Reader(io.BytesIO(data)).load()["args"])
for n in names:
    print(f"{n}: {repr(args[n]) if n in args else '-'}")
