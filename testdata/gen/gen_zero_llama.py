"""DeepSpeed ZeRO checkpoints of a real transformers LlamaForCausalLM (testdata/zero/llama_*/),
for `ckptconv zero-to-fp32` and `ckptconv verify` (a forward pass needs a real model).

Sub-commands (testdata/gen/run_zero_llama.sh runs them in this order for every case):

  train     under torchrun, one process per rank: builds the model, sets its weights from a
            fixed numpy generator, trains it for a few AdamW steps with DeepSpeed ZeRO on CPU
            (gloo), calls engine.save_checkpoint(<case dir>) and writes, from rank 0,
            <case dir>/config.json (the transformers config) and <case dir>/bf16_logits.json
            (forward of the bf16 module weights the engine held at save time, cast to float32).
  logits    after DeepSpeed's zero_to_fp32.py wrote <case dir>/expected/pytorch_model.bin and
            <case dir>/expected/safetensors/model.safetensors (same tensors, checked): loads
            the latter into LlamaForCausalLM(config.json) (every key, nothing left over, bit
            for bit) and writes <case dir>/logits.json (float32 forward). Also checks that the
            bf16 weights are the fp32 masters rounded to bfloat16 (their forward must give
            bf16_logits.json exactly).
  describe  expected/tensors.json and expected/checkpoint.json, as gen_zero.py describe
            writes them for the other cases (plus the transformers version).

See testdata/gen/README_zero.md ("LLaMA cases").
"""

import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SEED = 1234
STEPS = 3
MICRO_BATCH = 2
SEQ = 16
LR = 1e-3
LOGITS_INPUT_IDS = [1, 17, 42, 99, 150, 3, 199, 64]   # as testdata/hf/llama_tiny/logits.json


def llama_config():
    from transformers import LlamaConfig
    return LlamaConfig(
        vocab_size=200, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=32,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu",
        attention_bias=False, mlp_bias=False, dtype="float32")


def build_model(config):
    """LlamaForCausalLM in float32; every parameter then set from numpy's default_rng(SEED) in
    named_parameters order: 0.02*N(0,1) for matrices, 1 + 0.1*N(0,1) for the RMSNorm weights,
    so that no two tensors are equal."""
    import numpy as np
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.float32)
    rng = np.random.default_rng(SEED)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                a = 1.0 + 0.1 * rng.standard_normal(p.shape)
            else:
                a = 0.02 * rng.standard_normal(p.shape)
            p.copy_(torch.from_numpy(a.astype(np.float32)))
    return model


def ds_config(stage):
    return {
        "train_micro_batch_size_per_gpu": MICRO_BATCH,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 1000000,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": LR, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01,
                       "torch_adam": True},
        },
        "zero_optimization": {"stage": stage},
        "bf16": {"enabled": True},
    }


def forward_logits(model):
    import torch
    ids = torch.tensor([LOGITS_INPUT_IDS], dtype=torch.long)
    with torch.no_grad():
        return model(input_ids=ids).logits.float()[0]


def write_logits(path, producer, logits):
    """The layout of testdata/hf/llama_tiny/logits.json."""
    with open(path, "w") as f:
        json.dump({
            "producer": producer,
            "input_ids": LOGITS_INPUT_IDS,
            "shape": list(logits.shape),
            "note": "logits[i][v] for token position i, vocabulary id v; float32 values written "
                    "with Python repr",
            "logits": [[float(x) for x in row] for row in logits.tolist()],
        }, f, indent=0)
        f.write("\n")


def forward_desc(model):
    return (f"eval, float32, CPU, no attention_mask (causal), position_ids default "
            f"0..{len(LOGITS_INPUT_IDS) - 1}, attn_implementation "
            f"{model.config._attn_implementation}")


def float_model_from(config, state):
    """A fresh float32 LlamaForCausalLM holding exactly `state` (every key, nothing else)."""
    import torch
    model = build_model(config)
    result = model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=True)
    assert not result.missing_keys and not result.unexpected_keys, result
    sd = model.state_dict()
    assert set(sd) == set(state), sorted(set(sd) ^ set(state))
    for k, v in state.items():
        assert torch.equal(sd[k], v.to(torch.float32)), k
    return model.eval()


# --------------------------------------------------------------------------------------
# train


def train(args):
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import torch
    import deepspeed
    import transformers

    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    world = torch.distributed.get_world_size()

    config = llama_config()
    model = build_model(config)
    if rank == 0:
        # <case>/config.json, beside `latest`, as model.save_pretrained would write it
        config.architectures = ["LlamaForCausalLM"]
        config.save_pretrained(args.out)
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=ds_config(args.stage))
    if rank == 0:
        print(f"[gen_zero_llama] optimizer: {type(engine.optimizer).__name__}", flush=True)

    engine.train()
    for step in range(STEPS):
        g = torch.Generator().manual_seed(2000 + 10 * rank + step)
        ids = torch.randint(0, config.vocab_size, (MICRO_BATCH, SEQ), generator=g)
        out = engine(input_ids=ids, labels=ids)
        engine.backward(out.loss)
        engine.step()
        if rank == 0:
            print(f"[gen_zero_llama] step {step} loss {out.loss.item():.6f}", flush=True)

    engine.save_checkpoint(args.out)
    torch.distributed.barrier()

    # the bf16 module weights as the engine holds them at save time (stage 3: gathered)
    params = list(engine.module.parameters())
    if args.stage == 3:
        ctx = deepspeed.zero.GatheredParameters(params, modifier_rank=None)
    else:
        import contextlib
        ctx = contextlib.nullcontext()
    with ctx:
        state = {k: p.detach().clone() for k, p in engine.module.named_parameters()}
    torch.distributed.barrier()
    if rank == 0:
        assert all(v.dtype == torch.bfloat16 for v in state.values())
        model32 = float_model_from(config, state)
        write_logits(
            os.path.join(args.out, "bf16_logits.json"),
            f"transformers {transformers.__version__} LlamaForCausalLM.forward of the bf16 module "
            f"weights the DeepSpeed {deepspeed.__version__} ZeRO-{args.stage} engine (world size "
            f"{world}) held at save_checkpoint (global_step{STEPS}), each cast to float32 "
            f"(bf16 -> fp32 exact) and loaded into a fresh float32 model; "
            + forward_desc(model32) + "; these weights are the fp32 masters rounded to bfloat16",
            forward_logits(model32))
        print(f"[gen_zero_llama] saved {args.out}", flush=True)


# --------------------------------------------------------------------------------------
# logits


def logits(args):
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers import LlamaConfig

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    case = args.case_dir
    config = LlamaConfig.from_pretrained(case)
    state = load_file(os.path.join(case, "expected", "safetensors", "model.safetensors"))
    assert all(v.dtype == torch.float32 for v in state.values())
    # the default (.bin) output holds the same tensors, in DeepSpeed's state-dict order
    bin_state = torch.load(os.path.join(case, "expected", "pytorch_model.bin"), map_location="cpu",
                           weights_only=True)
    assert set(bin_state) == set(state)
    assert all(torch.equal(bin_state[k], v) for k, v in state.items())
    model = float_model_from(config, state)
    write_logits(
        os.path.join(case, "logits.json"),
        f"transformers {transformers.__version__} LlamaForCausalLM.forward of the consolidated "
        f"fp32 weights: LlamaForCausalLM(config.json).load_state_dict(expected/safetensors/"
        f"model.safetensors written by DeepSpeed's zero_to_fp32.py --safe_serialization; strict, "
        f"every tensor equal bit for bit; expected/pytorch_model.bin holds the same tensors); "
        + forward_desc(model),
        forward_logits(model))

    # The bf16 weights the engine held are the fp32 masters rounded to bfloat16: the forward of
    # the rounded masters gives bf16_logits.json exactly.
    rounded = float_model_from(config, {k: v.to(torch.bfloat16) for k, v in state.items()})
    got = [[float(x) for x in row] for row in forward_logits(rounded).tolist()]
    with open(os.path.join(case, "bf16_logits.json")) as f:
        want = json.load(f)["logits"]
    assert got == want, "bf16 module weights are not the fp32 masters rounded to bfloat16"
    print(f"[gen_zero_llama] {case}: logits.json written; "
          "bf16(masters) forward == bf16_logits.json", flush=True)


# --------------------------------------------------------------------------------------
# describe


def describe(args):
    import transformers
    import gen_zero

    gen_zero.describe(argparse.Namespace(case_dir=args.case_dir, note=args.note))
    for name in ("tensors.json", "checkpoint.json"):
        path = os.path.join(args.case_dir, "expected", name)
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        obj["versions"]["transformers"] = transformers.__version__
        with open(path, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--stage", type=int, required=True, choices=[1, 2, 3])
    t.add_argument("--out", required=True, help="case directory (save_checkpoint target)")
    t.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)
    lg = sub.add_parser("logits")
    lg.add_argument("case_dir")
    d = sub.add_parser("describe")
    d.add_argument("case_dir")
    d.add_argument("--note", default=None)
    args = ap.parse_args()
    {"train": train, "logits": logits, "describe": describe}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
