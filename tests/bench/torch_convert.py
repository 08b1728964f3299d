"""The Python way to do `ckptconv convert big.pt big.safetensors`, for comparison:
torch.load everything into memory, then safetensors.torch.save_file.

Run with the venv Python (Debian's torch + the safetensors package): torch_convert.py IN OUT
"""

import sys

import torch
from safetensors.torch import save_file


def main(src, out):
    sd = torch.load(src, map_location="cpu")
    save_file({k: v.contiguous() for k, v in sd.items()}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
