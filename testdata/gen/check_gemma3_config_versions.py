#!/usr/bin/env python3
"""By hand: which transformers versions read a Gemma 3 config.json the way it was meant.

Two steps, the first without transformers:

    python3 check_gemma3_config_versions.py make WORK [CKPTCONV]
    PYTHON check_gemma3_config_versions.py load WORK

`make` writes, for each Gemma 3 fixture (FIXTURES), model directories under WORK (the fixture's
model.safetensors and logits.json with another config.json):
  <name>_v5:    the config as transformers 5 spells it (rope_parameters per layer type only)
  <name>_both:  5's spelling plus 4.5x's (rope_scaling, rope_theta, rope_local_base_freq and
                sliding_window_pattern), built here
  <name>_v5-bases, <name>_both-bases: the same two with RoPE bases of their own
  <name>_ckptconv, <name>_ckptconv-bases: with CKPTCONV, the config.json that
                `hf2mcore --tp 2 --pp 2` then `mcore2hf` writes from the fixture and from
                <name>_both-bases
`load` loads each with the running transformers (Gemma3ForCausalLM, float32, CPU) and prints
what it built: per layer whether it slides, and for the full and sliding layers' rotary
embedding the base and linear factor its inv_freq implies (inv_freq[j] = 1 / (factor *
base^(2j/d))) and its attention scaling; then the largest |difference| of the logits to the
fixture's logits.json (and for <name>_v5 and <name>_ckptconv the RoPE and layer attributes of
the config object). `ok` when the layers, bases and factors are the fixture's and the
logits within 1e-5, `WRONG` otherwise. Exit status 1 when a config.json with both spellings
(<name>_both*, <name>_ckptconv*) is WRONG.
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = [os.path.join(HERE, "..", "hf", "gemma3_linear_tiny"),
            os.path.join(HERE, "..", "hf", "transformers5", "gemma3_linear_tiny"),
            os.path.join(HERE, "..", "hf", "transformers5", "gemma3_tiny")]


def intended(cfg):
    """(layer kinds, full (base, factor), sliding (base, factor)) that a config means, whichever
    transformers spelled it."""
    n = cfg["num_hidden_layers"]
    kinds = cfg.get("layer_types") or [
        "sliding_attention" if (i + 1) % cfg.get("sliding_window_pattern", 6) else "full_attention" for i in range(n)]
    rp = cfg.get("rope_parameters")
    if rp:
        full, local = rp["full_attention"], rp["sliding_attention"]
    else:
        full = dict(cfg.get("rope_scaling") or {"rope_type": "default"}, rope_theta=cfg.get("rope_theta", 1e6))
        local = {"rope_type": "default", "rope_theta": cfg.get("rope_local_base_freq", 1e4)}
    return kinds, (full["rope_theta"], full.get("factor", 1.0)), (local["rope_theta"], 1.0)


def pattern(kinds):
    """N when layer i is full exactly where (i + 1) % N == 0 (N > len: none is), else None."""
    for n in range(1, len(kinds) + 2):
        if all((k == "full_attention") == ((i + 1) % n == 0) for i, k in enumerate(kinds)):
            return n
    return None


def both(cfg):
    kinds, (theta, factor), (local, _) = intended(cfg)
    out = {k: v for k, v in cfg.items() if k not in ("rope_scaling", "rope_theta", "rope_local_base_freq", "torch_dtype")}
    out["rope_parameters"] = {
        "full_attention": dict({"factor": factor} if factor != 1.0 else {}, rope_theta=theta,
                               rope_type="linear" if factor != 1.0 else "default"),
        "sliding_attention": {"rope_theta": local, "rope_type": "default"}}
    out["layer_types"] = kinds
    out["rope_scaling"] = {"factor": factor, "rope_type": "linear"} if factor != 1.0 else None
    out["rope_theta"] = theta
    out["rope_local_base_freq"] = local
    if pattern(kinds):
        out["sliding_window_pattern"] = pattern(kinds)
    return dict(sorted(out.items()))


def v5(cfg):
    return {k: v for k, v in both(cfg).items() if k not in ("rope_scaling", "rope_theta", "rope_local_base_freq",
                                                          "sliding_window_pattern")}


def make(work, ckptconv):
    os.makedirs(work, exist_ok=True)
    for src in FIXTURES:
        name = os.path.basename(os.path.dirname(src)) + "_" + os.path.basename(src)
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        # the same with RoPE bases of its own (2e5 full, 2e4 sliding): the logits are not
        # logits.json's then, only the rotary embeddings are checked
        other = dict(cfg, rope_parameters=None, rope_scaling=intended(cfg)[1][1] != 1.0 and
                     {"factor": intended(cfg)[1][1], "rope_type": "linear"} or None,
                     rope_theta=200000.0, rope_local_base_freq=20000.0)
        del other["rope_parameters"]
        for tag, conf in (("v5", v5(cfg)), ("both", both(cfg)), ("v5-bases", v5(other)), ("both-bases", both(other))):
            d = os.path.join(work, f"{name}_{tag}")
            os.makedirs(d, exist_ok=True)
            for fn in ("model.safetensors", "logits.json"):
                shutil.copy(os.path.join(src, fn), d)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(conf, f, indent=2, sort_keys=True)
                f.write("\n")
        if ckptconv:  # the fixture, and its copy with bases of its own, through Megatron and back
            for tag, model in (("ckptconv", src), ("ckptconv-bases", os.path.join(work, f"{name}_both-bases"))):
                mc, back = os.path.join(work, name + "_mc"), os.path.join(work, f"{name}_{tag}")
                for d in (mc, back):
                    shutil.rmtree(d, ignore_errors=True)
                subprocess.run([ckptconv, "hf2mcore", model, mc, "--tp", "2", "--pp", "2", "-q"], check=True)
                subprocess.run([ckptconv, "mcore2hf", mc, back, "-q"], check=True)
                shutil.rmtree(mc)
                shutil.copy(os.path.join(src, "logits.json"), back)
        for tag, c in (("", cfg), ("-bases", other)):
            with open(os.path.join(work, name + tag + ".intended.json"), "w") as f:
                json.dump(intended(c), f)


def implied(inv_freq, scaling):
    d = 2 * len(inv_freq)
    factor = 1.0 / float(inv_freq[0])
    base = (float(inv_freq[0]) / float(inv_freq[1])) ** (d / 2)
    return base, factor, float(scaling)


def rotary(model):
    """{layer kind: (base, factor, attention scaling)} of what the model built."""
    m = model.model
    if hasattr(m, "rotary_emb_local"):  # transformers 4.5x: one module per kind
        return {"full_attention": implied(m.rotary_emb.inv_freq, m.rotary_emb.attention_scaling),
                "sliding_attention": implied(m.rotary_emb_local.inv_freq, m.rotary_emb_local.attention_scaling)}
    r = m.rotary_emb  # 5: buffers per kind
    return {k: implied(getattr(r, f"{k}_inv_freq"), getattr(r, f"{k}_attention_scaling")) for k in r.layer_types}


def load(work):
    import warnings

    import torch
    import transformers
    from transformers import AutoConfig, Gemma3ForCausalLM

    transformers.utils.logging.disable_progress_bar()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    bad = 0
    for d in sorted(x for x in os.listdir(work) if os.path.isfile(os.path.join(work, x, "config.json"))):
        path = os.path.join(work, d)
        name, tag = d.rsplit("_", 1)
        bases = tag.endswith("-bases")
        with open(os.path.join(work, name + ("-bases" if bases else "") + ".intended.json")) as f:
            kinds, full, local = json.load(f)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            config = AutoConfig.from_pretrained(path)
            model = Gemma3ForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
            attrs = {k: getattr(config, k, "(none)") for k in ("rope_scaling", "rope_theta", "rope_local_base_freq",
                                                                  "rope_parameters", "sliding_window_pattern",
                                                                  "_sliding_window_pattern")}
        built = ["sliding_attention" if layer.self_attn.is_sliding else "full_attention" for layer in model.model.layers]
        rope = rotary(model)
        with open(os.path.join(path, "logits.json")) as f:
            ref = json.load(f)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ref["input_ids"]])).logits[0]
        diff = float((logits - torch.tensor(ref["logits"])).abs().max())
        close = lambda a, b: abs(a - b) <= 1e-4 * abs(b)
        ok = (built == kinds and close(rope["full_attention"][0], full[0]) and close(rope["full_attention"][1], full[1])
              and close(rope["sliding_attention"][0], local[0]) and close(rope["sliding_attention"][1], 1.0)
              and (bases or diff < 1e-5))
        bad += not ok and not tag.startswith("v5")  # 5's spelling alone: what 4.5x misreads
        print(f"{d}: {'ok' if ok else 'WRONG'}: layers {''.join(k[0].upper() for k in built)} "
              f"(meant {''.join(k[0].upper() for k in kinds)}); "
              + "; ".join(f"{k.split('_')[0]} base {b:.6g} factor {fa:.6g} scaling {s:g}" for k, (b, fa, s) in sorted(rope.items()))
              + f" (meant full base {full[0]:g} factor {full[1]:g}, sliding base {local[0]:g}); "
              + (f"max |logits - logits.json| {diff:.3g}" + (" (other bases: not these logits)" if bases else "")))
        if tag in ("v5", "ckptconv"):  # what this transformers' config holds of either file
            print(f"    config: {attrs}")
        for x in w:
            if "sliding_window_pattern` attribute is deprecated" not in str(x.message):  # our getattr's
                print(f"    warning: {x.message}")
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        sys.exit(1 if load(sys.argv[2]) else 0)
