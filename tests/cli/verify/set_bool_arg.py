"""set_bool_arg.py FILE NAME true|false: set the boolean attribute NAME of the args Namespace in the
pickle of the Megatron rank file FILE (a torch.save zip), in place. The standard library only: the
value is the NEWTRUE/NEWFALSE opcode after the attribute's name (and its memo opcode), which
flipping leaves a valid pickle of the same length."""
import struct
import sys
import zipfile

path, name, value = sys.argv[1], sys.argv[2].encode(), sys.argv[3] == "true"
key = b"X" + struct.pack("<I", len(name)) + name
with zipfile.ZipFile(path) as z:
    items = [(i, z.read(i.filename)) for i in z.infolist()]
done = 0
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    for info, data in items:
        if info.filename.endswith("/data.pkl"):
            data = bytearray(data)
            at = data.find(key)
            assert at >= 0, f"{path}: no args.{name.decode()}"
            at += len(key)
            at += {ord("q"): 2, ord("r"): 5, 0x94: 1}.get(data[at], 0)
            assert data[at] in (0x88, 0x89), f"{path}: args.{name.decode()} is not a bool"
            data[at] = 0x88 if value else 0x89
            done += 1
        z.writestr(info, bytes(data))
assert done == 1
