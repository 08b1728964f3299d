#!/usr/bin/env python3
"""By hand, with transformers: each family fixture (gen_hf_families.py) through
`ckptconv hf2mcore --tp 2 --pp 2` and `ckptconv mcore2hf` loads as the same class, with the
same config values and tensors, and gives identical logits, which are those in logits.json
(written with the fixture) within 1e-5. Fixtures written by the other major version of
transformers: same class and tensors, and the logits of logits.json. Output: check_hf_families.log.

    PYTHON check_hf_families.py CKPTCONV FIXTURES_DIR WORK_DIR [NAME...]
        (FIXTURES_DIR: testdata/hf, or testdata/hf/transformers5; NAME: a fixture directory,
         default every one of NAMES that FIXTURES_DIR has)
A fixture this transformers has no class for (Qwen3 before transformers 4.51), or that ckptconv
refuses, is listed as not run, with why; the others must pass.
"""

import json
import os
import shutil
import subprocess
import sys

import torch

FIELDS = ["model_type", "architectures", "hidden_size", "intermediate_size", "num_hidden_layers",
          "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "rope_scaling",
          "rope_parameters", "sliding_window", "use_sliding_window", "layer_types", "tie_word_embeddings", "vocab_size",
          "max_position_embeddings"]


NAMES = ["qwen2_tiny", "mistral_tiny", "llama3_tiny", "llama32_tiny", "qwen3_tiny"]


def main():
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    ckptconv, hf, work = sys.argv[1:4]
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    for name in sys.argv[4:] or [n for n in NAMES if os.path.isdir(os.path.join(hf, n))]:
        src = os.path.join(hf, name)
        mc, back = os.path.join(work, name + "_mc"), os.path.join(work, name + "_hf")
        for d in (mc, back):
            shutil.rmtree(d, ignore_errors=True)
        with open(os.path.join(src, "logits.json")) as f:
            ref = json.load(f)
        with open(os.path.join(src, "config.json")) as f:
            model_type = json.load(f)["model_type"]
        if model_type not in CONFIG_MAPPING:
            print(f"{src}: not run: transformers {transformers.__version__} has no model_type {model_type}")
            continue
        for cmd in (["hf2mcore", src, mc, "--tp", "2", "--pp", "2", "-q"], ["mcore2hf", mc, back, "-q"]):
            r = subprocess.run([ckptconv] + cmd, capture_output=True, text=True)
            if r.returncode != 0:
                break
        if r.returncode != 0:
            print(f"{src}: not run: {r.stderr.strip()}")
            continue
        a = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32).eval()
        b = AutoModelForCausalLM.from_pretrained(back, torch_dtype=torch.float32).eval()
        ca, cb = AutoConfig.from_pretrained(src), AutoConfig.from_pretrained(back)
        # fields this transformers' config class has; a config written by another major version
        # may be misread at the source (transformers 4 takes rope_theta from the top level only,
        # which 5 does not write), so there only the logits of logits.json are the reference
        known = type(ca)().to_dict()
        same_major = ref["transformers"].split(".")[0] == transformers.__version__.split(".")[0]
        diff = [f for f in FIELDS if f in known and getattr(ca, f, None) != getattr(cb, f, None)] if same_major else []
        sa, sb = a.state_dict(), b.state_dict()
        tensors_equal = sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
        ids = torch.tensor([ref["input_ids"]])
        with torch.no_grad():
            la, lb = a(input_ids=ids).logits, b(input_ids=ids).logits
        to_ref = float((lb[0] - torch.tensor(ref["logits"])).abs().max())
        print(f"{src} (written by transformers {ref['transformers']}): {type(a).__name__} -> {type(b).__name__}; "
              f"config fields differing: {diff or 'none'}; {len(sa)} tensors {'identical' if tensors_equal else 'DIFFER'}; "
              f"max |logits difference| {float((la - lb).abs().max()):.3g} (to logits.json {to_ref:.3g})")
        if type(a) is not type(b) or diff or not tensors_equal or to_ref > 1e-5 or (same_major and not torch.equal(la, lb)):
            sys.exit(f"{name}: the round trip changed the model")


if __name__ == "__main__":
    main()
