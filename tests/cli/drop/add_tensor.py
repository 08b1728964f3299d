"""add_tensor.py DIR NAME: add a float32 tensor NAME of 4 zeros to the Hugging Face directory DIR
(to its last safetensors shard, and to model.safetensors.index.json when there is one). The
standard library only: the safetensors header is JSON, the data follows it."""
import glob
import json
import os
import struct
import sys

root, name = sys.argv[1:3]
shard = sorted(glob.glob(os.path.join(root, "*.safetensors")))[-1]
with open(shard, "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
    data = f.read()
header[name] = {"dtype": "F32", "shape": [4], "data_offsets": [len(data), len(data) + 16]}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(shard, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data + bytes(16))
index = os.path.join(root, "model.safetensors.index.json")
if os.path.exists(index):
    with open(index) as f:
        idx = json.load(f)
    idx["weight_map"][name] = os.path.basename(shard)
    with open(index, "w") as f:
        json.dump(idx, f)
