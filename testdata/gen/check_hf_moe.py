"""transformers loads what mcore2hf writes for the mixture-of-experts fixtures: for each fixture,
`ckptconv hf2mcore --tp 2 --pp 2` (Transformer Engine names) then `ckptconv mcore2hf`; the
output loads (from_pretrained, float32) as the fixture's class with its config values, and its
logits equal logits.json's (within 1e-5). Run by hand under each transformers version:

    VENV/bin/python testdata/gen/check_hf_moe.py build/ckptconv >> testdata/gen/check_hf_moe.log
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
FIXTURES = ["hf/mixtral_tiny", "hf/transformers5/mixtral_tiny", "hf/qwen3_moe_tiny", "hf/transformers5/qwen3_moe_tiny"]
FIELDS = ["num_local_experts", "num_experts", "num_experts_per_tok", "intermediate_size", "moe_intermediate_size",
          "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "router_aux_loss_coef", "head_dim",
          "rope_theta", "sliding_window", "tie_word_embeddings"]


def main():
    ckptconv = os.path.abspath(sys.argv[1])
    print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    for rel in FIXTURES:
        src = os.path.join(TESTDATA, rel)
        ref = json.load(open(os.path.join(src, "logits.json")))
        with tempfile.TemporaryDirectory() as work:
            mc, hf = os.path.join(work, "mc"), os.path.join(work, "hf")
            subprocess.run([ckptconv, "hf2mcore", src, mc, "--tp", "2", "--pp", "2", "-q"], check=True)
            subprocess.run([ckptconv, "mcore2hf", mc, hf, "-q"], check=True)
            b = transformers.AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.float32).eval()
            ids = torch.tensor([ref["input_ids"]])
            with torch.no_grad():
                lb = b(input_ids=ids).logits[0]
            err = float((lb - torch.tensor(ref["logits"])).abs().max())
            try:
                a = transformers.AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32).eval()
            except Exception as e:  # a config another version wrote (5.x's num_local_experts only)
                print("%-34s %-22s source not loadable here (%s); |out - logits.json| %.3g  %s" % (
                    rel, type(b).__name__, str(e).strip().splitlines()[-1][:60], err, "ok" if err <= 1e-5 else "FAIL"))
                continue
            with torch.no_grad():
                la = a(input_ids=ids).logits[0]
            # a key only the other version reads (5.x's num_local_experts for 4.53) is an extra attribute
            same_cfg = [f for f in FIELDS if hasattr(a.config, f) and getattr(a.config, f) != getattr(b.config, f, None)]
            print("%-34s %-22s config %-14s |out - source| %.3g  |out - logits.json| %.3g  %s" % (
                rel, type(b).__name__, "same" if not same_cfg else "DIFFERS " + ",".join(same_cfg),
                float((la - lb).abs().max()), err,
                "ok" if type(a) is type(b) and not same_cfg and err <= 1e-5 else "FAIL"))


if __name__ == "__main__":
    main()
