#!/usr/bin/env python3
"""megatron-core's own forward of the mixture-of-experts fixture, for verify's MoE layers:
testdata/megatron/distopt/m_tp1pp1dp2_ep2/logits.json.

    WORK=dir MCORE_PYTHON=... MEGATRON_LM=... testdata/gen/run_megatron.sh moe-logits

One process (TP 1, PP 1, DP 1, EP 1): the model of gen_megatron_distopt.py's family "m" (4
experts, SequentialMLP of the local spec, top-2 softmax routing, allgather dispatcher) is built
by Megatron-LM's setup_model_and_optimizer and loads the fixture's dp_reshardable torch_dist
save with load_checkpoint (dist_checkpointing gathers the EP 2 experts into EP 1), then
GPTModel.forward runs in eval mode on LOGITS_INPUT_IDS (gen_megatron.megatron_logits)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_megatron  # noqa: E402
import gen_megatron_distopt as g  # noqa: E402

# 16 positions over the 29 ids, so that every expert gets tokens
INPUT_IDS = [1, 17, 4, 9, 15, 3, 19, 6, 27, 0, 12, 22, 8, 25, 2, 11]


def main():
    source, out = sys.argv[1], sys.argv[2]
    c = g.layout_of(dict(family="m", tp=1, pp=1, dp=1, ep=1))
    args, model, optimizer, sched = g.setup(c, os.path.join(os.getcwd(), "moe_logits_save"),
                                            ["--ckpt-format", "torch_dist", "--load", source,
                                             "--no-load-rng", "--no-load-optim"])
    from megatron.training.checkpointing import load_checkpoint
    from megatron.training.utils import unwrap_model
    load_checkpoint(model, None, None)
    gpt = unwrap_model(model)[0]
    gen_megatron.LOGITS_INPUT_IDS = INPUT_IDS
    logits = gen_megatron.megatron_logits(gpt, INPUT_IDS)
    gen_megatron.write_logits_json(
        out, logits, gen_megatron.LOGITS_PRODUCER.replace("(local spec)", "(local spec, 4 experts top-2, "
                                                          "allgather dispatcher, loaded at EP 1 from the "
                                                          "dp_reshardable save)"),
        gen_megatron.LOGITS_NOTE, args.padded_vocab_size, g.VOCAB + 1)
    print("logits", tuple(logits.shape), "written to", out)


if __name__ == "__main__":
    main()
