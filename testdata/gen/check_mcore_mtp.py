"""Megatron-LM loads what hf2mcore writes for DeepSeek-V3 with a multi-token prediction layer.
testdata/hf/deepseek_v3_tiny (transformers 4.53.3), with num_experts_per_tok 4 and
rms_norm_eps 1e-6 (check_mcore_deepseek.py says why), given an MTP layer by
tests/cli/deepseek_v3/make_mtp.py (layer 3: layer 2's tensors, enorm, hnorm, eh_proj,
shared_head.norm, and copies of embed_tokens and lm_head): `ckptconv hf2mcore --transformer-impl
local` (TP 1 PP 1, and TP 2 PP 3 EP 2 then `ckptconv reshard --tp 1 --pp 1 --ep 1`); megatron-core
0.16.1's GPTModel built by Megatron-LM's gpt_builder from the checkpoint's args (mtp_num_layers 1:
an MTP block from the last layer's spec) loads the model state with load_state_dict(strict=True)
(no missing, no unexpected key), the file's keys in the model's state_dict order, and runs
forward on the CPU (gloo) through the decoder and the MTP block; its main logits must equal
transformers' forward of the same weights (transformers builds no MTP layer). The worker is
check_mcore_deepseek.py's. By hand, not a ctest:

    PYTHONPATH=/path/to/Megatron-LM:testdata/gen VENV/bin/python testdata/gen/check_mcore_mtp.py \\
        build/ckptconv > testdata/gen/check_mcore_mtp.log
"""

import os
import subprocess
import sys
import tempfile

import check_mcore_deepseek as base

MAKE_MTP = os.path.join(base.TESTDATA, "..", "tests", "cli", "deepseek_v3", "make_mtp.py")


def mtp_forward():
    """GPTModel.forward runs its MTP block only with labels (it returns the loss then, the MTP
    layers' loss added through MTPLossAutoScaler): the worker's forward first runs the model with
    labels (the ids, shifted by one) and requires a finite loss from the decoder and the MTP
    block, then returns the main logits, the MTP block left out."""
    from megatron.core.models.gpt import gpt_model

    plain = gpt_model.GPTModel.forward

    def forward(self, input_ids, position_ids, attention_mask, **kw):
        import torch

        labels = torch.roll(input_ids, -1, dims=1)
        loss = plain(self, input_ids, position_ids, attention_mask, labels=labels, **kw)
        assert self.mtp_process and torch.isfinite(loss).all(), loss
        sys.stderr.write("MTP forward with labels: loss %s\n" % loss.float().mean().item())
        self.mtp_process, layers, self.config.mtp_num_layers = False, self.config.mtp_num_layers, None
        try:
            return plain(self, input_ids, position_ids, attention_mask, **kw)
        finally:
            self.mtp_process, self.config.mtp_num_layers = True, layers

    gpt_model.GPTModel.forward = forward


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        mtp_forward()
        base.worker(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    import megatron.core
    import torch
    import transformers

    base.__file__ = os.path.abspath(__file__)
    ckptconv = os.path.abspath(sys.argv[1])
    print("check_mcore_mtp.py: DeepSeek-V3 with an MTP layer, hf2mcore --transformer-impl local (TP1 PP1; TP2 PP3 "
          "EP2 -> reshard TP1 PP1 EP1) -> megatron-core GPTModel with mtp_num_layers 1 (gpt_builder from the "
          "checkpoint's args, float32), load_state_dict(strict=True), forward (CPU, gloo)")
    print("torch %s, megatron-core %s, transformers %s, Python %s" % (
        torch.__version__, megatron.core.__version__, transformers.__version__, sys.version.split()[0]))
    print()
    with tempfile.TemporaryDirectory() as work:
        src = os.path.join(base.TESTDATA, "hf/deepseek_v3_tiny")
        variant = os.path.join(work, "variant")
        base.derive(src, variant, {"num_experts_per_tok": base.TOPK, "rms_norm_eps": 1e-6})
        subprocess.run([sys.executable, MAKE_MTP, variant], check=True)
        ref = os.path.join(work, "ref.json")
        base.reference(variant, os.path.join(src, "logits.json"), ref)
        direct, mc, tp1 = (os.path.join(work, d) for d in ("direct", "mc", "tp1"))
        base.run(ckptconv, "hf2mcore", variant, direct, "--transformer-impl", "local")
        base.run(ckptconv, "hf2mcore", variant, mc, "--tp", "2", "--pp", "3", "--ep", "2", "--transformer-impl", "local")
        base.run(ckptconv, "reshard", mc, tp1, "--tp", "1", "--pp", "1", "--ep", "1")
        print("%-32s %-26s %-42s %-44s %3s %-5s %-9s" % ("fixture", "what", "modules (layer 0, MLP 0/1)", "routing",
                                                         "n", "order", "max diff"))
        for how, ckpt in (("hf2mcore TP1 PP1", direct), ("TP2 PP3 EP2 -> reshard TP1", tp1)):
            out, err = base.forward(ckpt, ref)
            print(base.row("deepseek_v3 + MTP (4.53)", how, out) if out else
                  "%-32s %-26s megatron-core: %s" % ("deepseek_v3 + MTP (4.53)", how, err))


if __name__ == "__main__":
    main()
