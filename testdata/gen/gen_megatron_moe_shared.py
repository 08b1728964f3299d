#!/usr/bin/env python3
"""A mixture-of-experts model with a shared expert, written and run by megatron-core on
the CPU: testdata/megatron/moe_shared_tp1/ (legacy files, model only) and its logits.json.

    WORK=dir MCORE_PYTHON=... MEGATRON_LM=... testdata/gen/run_megatron.sh moe-shared

One process (TP 1, PP 1, DP 1, EP 1): gen_megatron_distopt.py's family "m" (2 layers, hidden 8,
4 experts of ffn 16, top-2 softmax routing, SequentialMLP of the local spec) with
--moe-shared-expert-intermediate-size 16 (no gate: its gate_weight has no parallel layout entry yet), built by Megatron-LM's
setup_model_and_optimizer at its seeded initialisation (no training), saved by save_checkpoint
(--ckpt-format torch, --no-save-optim, --no-save-rng), then GPTModel.forward in eval mode on
16 token ids (gen_megatron.megatron_logits)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_megatron  # noqa: E402
import gen_megatron_distopt as g  # noqa: E402

INPUT_IDS = [1, 17, 4, 9, 15, 3, 19, 6, 27, 0, 12, 22, 8, 25, 2, 11]


def main():
    out = sys.argv[1]
    c = g.layout_of(dict(family="m", tp=1, pp=1, dp=1, ep=1,
                         extra=("--moe-shared-expert-intermediate-size", "16")))
    args, model, optimizer, sched = g.setup(c, out, ["--ckpt-format", "torch", "--no-save-optim", "--no-save-rng"])
    from megatron.training.checkpointing import save_checkpoint
    from megatron.training.utils import unwrap_model
    args.iteration = 1
    save_checkpoint(1, model, optimizer, sched, 0)
    gpt = unwrap_model(model)[0]
    gen_megatron.LOGITS_INPUT_IDS = INPUT_IDS
    logits = gen_megatron.megatron_logits(gpt, INPUT_IDS)
    gen_megatron.write_logits_json(
        os.path.join(out, "logits.json"), logits,
        gen_megatron.LOGITS_PRODUCER.replace("(local spec)", "(local spec, 4 experts top-2 and a shared "
                                             "expert, allgather dispatcher)"),
        gen_megatron.LOGITS_NOTE, args.padded_vocab_size, g.VOCAB + 1)
    print("logits", tuple(logits.shape), "written to", out)


if __name__ == "__main__":
    main()
