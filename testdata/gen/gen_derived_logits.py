#!/usr/bin/env python3
"""testdata/gen/logits_<name>.json: transformers' float32 logits of models the tests derive at
test time from a committed fixture (no model file is committed for them):

    PYTHON gen_derived_logits.py TESTDATA_DIR [NAME...]   (default: all)

- qwen3_moe_dense: testdata/hf/qwen3_moe_tiny with layer 1 dense: config intermediate_size 32,
  mlp_only_layers [1]; model.layers.1.mlp.experts.0.{gate,up,down}_proj.weight renamed to
  model.layers.1.mlp.{gate,up,down}_proj.weight, the other experts and mlp.gate.weight of layer 1
  left out (tests/unit/test_verify_moe.c derives the same).
- deepseek_v3_plain_rope: testdata/hf/deepseek_v3_tiny with num_experts_per_tok 4,
  rms_norm_eps 1e-6 (what hf2mcore converts) and rope_scaling removed (plain RoPE, softmax scale
  qk_head_dim^-0.5); the same weights (tests/unit/test_verify_mla.c derives the same).
- deepseek_v3_q_proj: deepseek_v3_plain_rope's config with rope_scaling kept and q_lora_rank
  null (no query compression, as DeepSeek-V2-Lite); each layer's q_a_proj, q_a_layernorm and
  q_b_proj replaced by q_proj = [q_b_proj | q_b_proj] (tests/cli/deepseek_v3/make_q_proj.py and
  tests/unit/test_verify_mla.c derive the same).
The derived config.json and model.safetensors (bfloat16, as the fixture) are written to a
temporary directory and loaded with from_pretrained in float32, then run on INPUT_IDS. The
versions that wrote each file are in it: qwen3_moe_dense with transformers 4.53.3,
deepseek_v3_plain_rope with 5.24.0 and deepseek_v3_q_proj with 5.23.0 (4.53's DeepSeek-V3 masks the experts of the groups it
leaves out with 0.0, not -inf, so with num_experts_per_tok 4 it routes tokens to experts of
those groups where a chosen expert's biased score is negative; 5.x and Megatron's
group_limited_topk mask with -inf, as verify does).
"""

import json
import os
import platform
import sys
import tempfile

import torch

INPUT_IDS = [1, 17, 42, 99, 120, 3, 127, 64]


def qwen3_moe_dense(testdata):
    import transformers
    src = os.path.join(testdata, "hf", "qwen3_moe_tiny")
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["intermediate_size"] = 32
    cfg["mlp_only_layers"] = [1]
    sd = load(src)
    p = "model.layers.1.mlp."
    for w in ("gate_proj", "up_proj", "down_proj"):
        sd[p + w + ".weight"] = sd.pop(p + "experts.0." + w + ".weight")
        for e in (1, 2, 3):
            del sd[p + "experts.%d.%s.weight" % (e, w)]
    del sd[p + "gate.weight"]
    return transformers.Qwen3MoeForCausalLM, cfg, sd


def deepseek_v3_plain_rope(testdata):
    import transformers
    src = os.path.join(testdata, "hf", "deepseek_v3_tiny")
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["num_experts_per_tok"] = 4
    cfg["rms_norm_eps"] = 1e-6
    del cfg["rope_scaling"]
    return transformers.DeepseekV3ForCausalLM, cfg, load(src)


def deepseek_v3_q_proj(testdata):
    """deepseek_v3_tiny as hf2mcore converts it, without query compression (q_lora_rank null):
    q_proj = [q_b_proj | q_b_proj] in each layer, as tests/cli/deepseek_v3/make_q_proj.py"""
    import transformers
    src = os.path.join(testdata, "hf", "deepseek_v3_tiny")
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["num_experts_per_tok"] = 4
    cfg["rms_norm_eps"] = 1e-6
    cfg["q_lora_rank"] = None
    sd = {}
    for name, t in load(src).items():
        if name.endswith("q_a_proj.weight"):
            qb = load(src)[name.replace("q_a_proj", "q_b_proj")]
            sd[name.replace("q_a_proj", "q_proj")] = torch.cat([qb, qb], dim=1)
        elif not name.endswith(("q_a_layernorm.weight", "q_b_proj.weight")):
            sd[name] = t
    return transformers.DeepseekV3ForCausalLM, cfg, sd


def load(src):
    from safetensors.torch import load_file
    return load_file(os.path.join(src, "model.safetensors"))


MODELS = {"qwen3_moe_dense": qwen3_moe_dense, "deepseek_v3_plain_rope": deepseek_v3_plain_rope,
          "deepseek_v3_q_proj": deepseek_v3_q_proj}


def main():
    import safetensors
    import transformers
    testdata = sys.argv[1]
    for name in sys.argv[2:] or MODELS:
        from safetensors.torch import save_file
        cls, cfg, sd = MODELS[name](testdata)
        with tempfile.TemporaryDirectory() as d:
            json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
            save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
            model = cls.from_pretrained(d, torch_dtype=torch.float32).eval()
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([INPUT_IDS])).logits.float()
        with open(os.path.join(testdata, "gen", "logits_%s.json" % name), "w") as f:
            json.dump({
                "input_ids": INPUT_IDS,
                "logits": [[round(float(x), 7) for x in row] for row in logits[0]],
                "class": type(model).__name__,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "safetensors": safetensors.__version__,
                "python": platform.python_version(),
            }, f)
        print(name, type(model).__name__)


if __name__ == "__main__":
    main()
