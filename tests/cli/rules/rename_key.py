"""rename_key.py FILE OLD NEW: rename the key OLD of the torch.save zip FILE (pickle protocol 2,
its strings BINUNICODE: opcode X, a 4-byte length, the bytes) to NEW of any length, rewriting the
zip with the standard library. Gives a Megatron checkpoint a tensor no layout rule takes."""
import struct
import sys
import zipfile

path, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
op = lambda s: b"X" + struct.pack("<I", len(s)) + s
with zipfile.ZipFile(path) as z:
    items = [(i, z.read(i.filename)) for i in z.infolist()]
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    for info, data in items:
        if info.filename.endswith("/data.pkl"):
            assert data.count(op(old)) == 1, old
            data = data.replace(op(old), op(new))
        z.writestr(info, data)
