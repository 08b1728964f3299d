"""Writes a LLaMA-shaped torch.save checkpoint of at least 2 GiB for the convert benchmark.

Run with Debian's torch: /usr/bin/python3 tests/bench/make_big.py OUT.pt
Layout (hidden 4096, ffn 11008, vocab 32000, 4 layers): fp32 embedding, bf16 layers and
output head, fp32 norms; about 2.4 GB in one plain state dict (default torch.save).
"""

import collections
import sys

import torch

HIDDEN, FFN, VOCAB, LAYERS = 4096, 11008, 32000, 4


def weight(rows, cols, dtype):
    return (torch.randn(rows, cols) * 0.02).to(dtype)


def main(out):
    torch.manual_seed(0)
    bf = torch.bfloat16
    sd = collections.OrderedDict()
    sd["model.embed_tokens.weight"] = weight(VOCAB, HIDDEN, torch.float32)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            sd[p + f"self_attn.{name}.weight"] = weight(HIDDEN, HIDDEN, bf)
        sd[p + "mlp.gate_proj.weight"] = weight(FFN, HIDDEN, bf)
        sd[p + "mlp.up_proj.weight"] = weight(FFN, HIDDEN, bf)
        sd[p + "mlp.down_proj.weight"] = weight(HIDDEN, FFN, bf)
        sd[p + "input_layernorm.weight"] = torch.ones(HIDDEN)
        sd[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN)
    sd["model.norm.weight"] = torch.ones(HIDDEN)
    sd["lm_head.weight"] = weight(VOCAB, HIDDEN, bf)
    total = sum(t.numel() * t.element_size() for t in sd.values())
    assert total >= 2 << 30, total
    torch.save(sd, out)
    print(f"{out}: {len(sd)} tensors, {total / 2**30:.2f} GiB of tensor data, torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])
