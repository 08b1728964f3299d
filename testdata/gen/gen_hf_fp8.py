"""Write testdata/hf/transformers5/qwen3_fp8_tiny: qwen3_tiny released the way DeepSeek-V3 and
Qwen3 "-FP8" checkpoints are: every Linear weight of the layers F8_E4M3 with a float32
`weight_scale_inv` per 128x128 block (torch's float8_e4m3fn rounding), the embeddings, norms
and lm_head bf16, config.json with quantization_config. reference.json holds the sha256 of each
tensor's bytes as torch dequantises them (weight.to(float32) * scale expanded over its blocks,
.to(bfloat16), as DeepSeek's fp8_cast_bf16.py and transformers' Fp8Dequantize do), and of
big.weight: a 130x136 tensor (several blocks, partial ones) in big.safetensors.

Run with torch >= 2.1 (float8_e4m3fn) and safetensors:
  python testdata/gen/gen_hf_fp8.py testdata/hf/transformers5/qwen3_tiny testdata/hf/transformers5/qwen3_fp8_tiny"""
import hashlib
import json
import sys

import torch
from safetensors.torch import load_file, save_file

BLOCK = 128
FP8_MAX = 448.0


def quantise(w):
    rows, cols = w.shape
    br, bc = (rows + BLOCK - 1) // BLOCK, (cols + BLOCK - 1) // BLOCK
    scale = torch.empty(br, bc, dtype=torch.float32)
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(br):
        for j in range(bc):
            blk = w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK].float()
            s = blk.abs().max().clamp(min=1e-12) / FP8_MAX
            scale[i, j] = s
            q[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] = (blk / s).to(torch.float8_e4m3fn)
    return q, scale


def dequantise(q, scale):
    rows, cols = q.shape
    s = scale.repeat_interleave(BLOCK, 0)[:rows].repeat_interleave(BLOCK, 1)[:, :cols]
    return (q.to(torch.float32) * s).to(torch.bfloat16)


def sha(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def main(src, dst):
    torch.manual_seed(0)
    tensors, ref = {}, {}
    for name, w in load_file(f"{src}/model.safetensors").items():
        if w.ndim == 2 and ".layers." in name and name.endswith("_proj.weight"):
            q, s = quantise(w)
            tensors[name], tensors[name + "_scale_inv"] = q, s
            ref[name] = sha(dequantise(q, s))
        else:
            tensors[name] = w.to(torch.bfloat16)
            ref[name] = sha(tensors[name])
    save_file(tensors, f"{dst}/model.safetensors", metadata={"format": "pt"})
    big = torch.randn(130, 136) * torch.linspace(0.01, 100, 136)
    q, s = quantise(big)
    save_file({"big.weight": q, "big.weight_scale_inv": s}, f"{dst}/big.safetensors", metadata={"format": "pt"})
    ref["big.weight"] = sha(dequantise(q, s))
    with open(f"{src}/config.json") as f:
        config = json.load(f)
    config["dtype"] = "bfloat16"
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [BLOCK, BLOCK]}
    with open(f"{dst}/config.json", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(f"{dst}/reference.json", "w") as f:
        json.dump({"torch": torch.__version__, "sha256": ref}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
