"""Put a copy of one tensor of a sharded safetensors directory into another of its shards
as well, the index unchanged (Python's standard library only): python3 dup.py DIR NAME"""
import json
import os
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        return header, f.read()


def main():
    src, name = sys.argv[1], sys.argv[2]
    with open(os.path.join(src, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    home = weight_map[name]
    other = sorted(f for f in set(weight_map.values()) if f != home)[0]
    header, data = read(os.path.join(src, home))
    info = dict(header[name])
    blob = data[info["data_offsets"][0]:info["data_offsets"][1]]
    header, data = read(os.path.join(src, other))
    info["data_offsets"] = [len(data), len(data) + len(blob)]
    header[name] = info
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(src, other), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data + blob)


main()
