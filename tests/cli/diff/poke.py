"""Set one float32 element of a safetensors file in place (Python's standard library only):
  python3 poke.py FILE NAME FLAT_INDEX VALUE"""
import json
import struct
import sys


def main():
    path, name, index, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        info = json.loads(f.read(n))[name]
        assert info["dtype"] == "F32"
        f.seek(8 + n + info["data_offsets"][0] + 4 * index)
        f.write(struct.pack("<f", value))


main()
