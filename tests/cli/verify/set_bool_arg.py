"""set_bool_arg.py FILE NAME true|false: set the boolean attribute NAME of the args Namespace in the
pickle of the Megatron rank file FILE (a torch.save zip), in place. The standard library only: the
value is the NEWTRUE/NEWFALSE opcode after the attribute's name (and its memo opcode), which
flipping leaves a valid pickle of the same length. The file is rewritten only once that worked."""
import struct
import sys
import zipfile

path, name, value = sys.argv[1], sys.argv[2].encode(), sys.argv[3] == "true"
key = b"X" + struct.pack("<I", len(name)) + name
with zipfile.ZipFile(path) as z:
    items = [(i, z.read(i.filename)) for i in z.infolist()]
pickles = [k for k, (info, _) in enumerate(items) if info.filename.endswith("/data.pkl")]
assert len(pickles) == 1, f"{path}: {len(pickles)} pickles"
data = bytearray(items[pickles[0]][1])
at = data.find(key)
assert at >= 0, f"{path}: no args.{name.decode()}"
at += len(key)
at += {ord("q"): 2, ord("r"): 5, 0x94: 1}.get(data[at], 0)
assert data[at] in (0x88, 0x89), f"{path}: args.{name.decode()} is not a bool"
data[at] = 0x88 if value else 0x89
items[pickles[0]] = (items[pickles[0]][0], bytes(data))
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    for info, blob in items:
        z.writestr(info, blob)
