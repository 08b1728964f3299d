#!/usr/bin/env python3
"""testdata/hf/llama_tiny: a tiny LlamaForCausalLM written by transformers' save_pretrained,
sharded (max_shard_size="100KB") with model.safetensors.index.json, plus its logits.

    MCORE_PYTHON gen_hf_llama.py OUT_DIR          (run_megatron.sh calls it)

Same hyper-parameters as the Megatron fixtures (testdata/megatron, gen_megatron.py): vocab 200,
hidden 64, 4 heads / 2 KV heads (head_dim 16), intermediate 96 (SwiGLU), 4 layers, untied
lm_head, rope_theta 10000, rms_norm_eps 1e-5, float32; torch.manual_seed(1234) before
construction (transformers' own _init_weights: normal(0, initializer_range=0.02) for linears and
embeddings, ones for RMSNorm), then every RMSNorm weight += N(0, 0.05^2) (generator seeded by
sha256 of the parameter name). The weights are NOT those of the Megatron fixtures (different
initialisation code); they are the input of hf2mcore tests.
"""

import hashlib
import json
import os
import platform
import shutil
import sys

import torch

SEED = 1234
INPUT_IDS = [1, 17, 42, 99, 150, 3, 199, 64]  # same as gen_megatron.LOGITS_INPUT_IDS


def tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def config():
    from transformers import LlamaConfig
    return LlamaConfig(
        vocab_size=200, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=32,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu",
        attention_bias=False, mlp_bias=False, dtype="float32")


def main():
    import numpy as np
    import safetensors
    import transformers
    from safetensors import safe_open
    from transformers import LlamaForCausalLM

    out = sys.argv[1]
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config()).to(torch.float32).eval()
    # RMSNorm weights are initialised to 1: shift every 1-D parameter by N(0, 0.05^2), seeded by
    # its name, so that no two norm vectors are equal (as after training)
    with torch.no_grad():
        for k, p in model.named_parameters():
            if p.dim() == 1:
                seed = int.from_bytes(hashlib.sha256(k.encode()).digest()[:8], "little") >> 1
                g = torch.Generator().manual_seed(seed)
                p.add_(torch.randn(p.shape, generator=g) * 0.05)
    # transformers 5 always writes safetensors (the safe_serialization argument is gone)
    model.save_pretrained(out, max_shard_size="100KB")
    for f in os.listdir(out):
        os.chmod(os.path.join(out, f), 0o644)  # safetensors shards are written 0600

    ids = torch.tensor([INPUT_IDS], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    with open(os.path.join(out, "logits.json"), "w") as f:
        json.dump({
            "producer": f"transformers {transformers.__version__} LlamaForCausalLM.forward, eval, "
                        "float32, CPU, no attention_mask (causal), position_ids default 0..7",
            "input_ids": INPUT_IDS,
            "shape": list(logits.shape[1:]),
            "note": "logits[i][v] for token position i, vocabulary id v; float32 values written "
                    "with Python repr",
            "logits": [[float(x) for x in row] for row in logits[0].tolist()],
        }, f, indent=0)
        f.write("\n")

    # reference record: files, index, every tensor of every shard
    files = sorted(os.listdir(out))
    index = json.load(open(os.path.join(out, "model.safetensors.index.json")))
    tensors = []
    sd = model.state_dict()
    for fn in sorted(set(index["weight_map"].values())):
        with safe_open(os.path.join(out, fn), "pt") as st:
            for k in st.keys():
                t = st.get_tensor(k)
                assert torch.equal(t, sd[k]), k
                tensors.append({"name": k, "file": fn, "dtype": str(t.dtype).replace("torch.", ""),
                                "shape": list(t.shape),
                                "sha256": hashlib.sha256(tensor_bytes(t)).hexdigest()})
    rec = {
        "fixture": "hf/llama_tiny",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__,
                     "safetensors": safetensors.__version__, "numpy": np.__version__},
        "producer": "torch.manual_seed(1234); LlamaForCausalLM(LlamaConfig(...)).save_pretrained("
                    "out, max_shard_size='100KB')",
        "config": json.load(open(os.path.join(out, "config.json"))),
        "files": [{"name": f, "size": os.path.getsize(os.path.join(out, f)),
                   "sha256": sha256_file(os.path.join(out, f))} for f in files],
        "index": index,
        "tensors": tensors,
        "logits_input_ids": INPUT_IDS,
    }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print(f"gen_hf_llama: {out}: {len(files)} files, {len(tensors)} tensors, "
          f"{sum(os.path.getsize(os.path.join(out, f)) for f in files)} bytes")


if __name__ == "__main__":
    main()
