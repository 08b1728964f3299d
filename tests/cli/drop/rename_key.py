"""rename_key.py FILE OLD NEW: rename a key in the pickle of the torch.save zip FILE (OLD and NEW of
one length, so the pickle stays valid), rewriting the zip with the standard library. Used to give
a Megatron checkpoint a tensor no layout rule takes."""
import sys
import zipfile

path, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
assert len(old) == len(new)
with zipfile.ZipFile(path) as z:
    items = [(i, z.read(i.filename)) for i in z.infolist()]
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    for info, data in items:
        if info.filename.endswith("/data.pkl"):
            assert data.count(old) == 1
            data = data.replace(old, new)
        z.writestr(info, data)
