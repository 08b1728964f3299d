"""Writes an all-bfloat16, LLaMA-shaped torch.save checkpoint of about 2 GB (2.14e9 bytes of
tensor data) for the HDF5 / zstd benchmark (tests/bench/hdf5_zstd.sh).

Run with Debian's torch: /usr/bin/python3 tests/bench/make_bf16_big.py OUT.pt
Layout (hidden 4096, ffn 11008, vocab 32000, 4 layers): every tensor bfloat16, weights drawn
from N(0, 0.02) as a trained model's are roughly distributed (not zeros: the compression
ratio then means something), norms N(1, 0.05). One plain state dict, default torch.save.
"""

import collections
import sys

import torch

HIDDEN, FFN, VOCAB, LAYERS = 4096, 11008, 32000, 4


def weight(rows, cols, std=0.02):
    # in row blocks, so that the float32 intermediate stays small
    out = torch.empty(rows, cols, dtype=torch.bfloat16)
    for r in range(0, rows, 2048):
        n = min(2048, rows - r)
        out[r:r + n] = (torch.randn(n, cols) * std).to(torch.bfloat16)
    return out


def norm(n):
    return (1.0 + 0.05 * torch.randn(n)).to(torch.bfloat16)


def main(out):
    torch.manual_seed(0)
    sd = collections.OrderedDict()
    sd["model.embed_tokens.weight"] = weight(VOCAB, HIDDEN)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            sd[p + f"self_attn.{name}.weight"] = weight(HIDDEN, HIDDEN)
        sd[p + "mlp.gate_proj.weight"] = weight(FFN, HIDDEN)
        sd[p + "mlp.up_proj.weight"] = weight(FFN, HIDDEN)
        sd[p + "mlp.down_proj.weight"] = weight(HIDDEN, FFN)
        sd[p + "input_layernorm.weight"] = norm(HIDDEN)
        sd[p + "post_attention_layernorm.weight"] = norm(HIDDEN)
    sd["model.norm.weight"] = norm(HIDDEN)
    sd["lm_head.weight"] = weight(VOCAB, HIDDEN)
    total = sum(t.numel() * t.element_size() for t in sd.values())
    assert total >= 2e9, total
    assert all(t.dtype == torch.bfloat16 for t in sd.values())
    torch.save(sd, out)
    print(f"{out}: {len(sd)} bfloat16 tensors, {total / 1e9:.2f} GB of tensor data, torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])
