"""Make a Hugging Face directory with tied embeddings from one without (Python's standard
library only): python3 tie.py HF_DIR OUT_DIR. OUT_DIR gets the tensors of all of HF_DIR's
safetensors files but lm_head.weight, in one model.safetensors, and the config.json with
tie_word_embeddings true, as transformers saves a tied model."""
import json
import os
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    for name, info in header.items():
        if name != "__metadata__":
            lo, hi = info["data_offsets"]
            yield name, info["dtype"], info["shape"], data[lo:hi]


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out)
    header, data = {}, b""
    for file in sorted(f for f in os.listdir(src) if f.endswith(".safetensors")):
        for name, dtype, shape, blob in tensors(os.path.join(src, file)):
            if name != "lm_head.weight":
                header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
                data += blob
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config["tie_word_embeddings"] = True
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


main()
