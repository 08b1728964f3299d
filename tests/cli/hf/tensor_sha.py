"""tensor_sha.py REFERENCE FILE...: compare the sha256 of each tensor's bytes in the safetensors
FILEs (standard library only) with REFERENCE's "sha256" map (a reference.json of a fixture),
for the tensors the files hold; print one line per tensor (name, dtype, same|DIFFERENT) and exit
1 when one differs."""
import hashlib
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    for name, e in header.items():
        if name != "__metadata__":
            lo, hi = e["data_offsets"]
            yield name, e["dtype"], hashlib.sha256(data[base + lo:base + hi]).hexdigest()


def main():
    with open(sys.argv[1]) as f:
        ref = json.load(f)["sha256"]
    bad = 0
    for path in sys.argv[2:]:
        for name, dtype, digest in tensors(path):
            if name not in ref:
                continue
            same = digest == ref[name]
            bad += not same
            print(name, dtype, "same" if same else "DIFFERENT")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
