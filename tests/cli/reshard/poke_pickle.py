"""Edit one value in the pickle of a torch.save file, in place, the way a hand-edited or
foreign checkpoint would carry it: the one match of PATTERN (a bytes regex whose first group
is kept) becomes that group followed by NEW. Both arguments take Python escapes (\\x03).

    poke_pickle.py FILE PATTERN NEW
"""
import codecs
import re
import sys
import zipfile

path, pattern, new = sys.argv[1], codecs.escape_decode(sys.argv[2])[0], codecs.escape_decode(sys.argv[3])[0]
items = []
with zipfile.ZipFile(path) as z:
    for info in z.infolist():
        data = z.read(info.filename)
        if info.filename.endswith("data.pkl"):
            data, n = re.subn(pattern, lambda m: m.group(1) + new, data, flags=re.S)
            if n != 1:
                sys.exit(f"{path}: {n} matches of {sys.argv[2]}, expected 1")
        items.append((info, data))
with zipfile.ZipFile(path, "w") as out:
    for info, data in items:
        out.writestr(info, data)
