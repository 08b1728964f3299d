"""PaddleNLP itself loads what `ckptconv reshard` wrote and gives the same logits.

Needs the paddlepaddle 2.6 + paddlenlp 2.8 environment of README_paddlenlp.md (PaddleNLP does
not install in CI; this is run by hand, its output is in README_paddlenlp_reshard.md):

    "$VENV/bin/python" testdata/gen/check_paddlenlp_load.py LOGITS_JSON DIR [DIR...]

Each DIR is a PaddleNLP checkpoint directory at any TP/PP layout (model_state*.pdparams,
config.json), here one ckptconv wrote from the fixtures of testdata/paddlenlp/.
- At TP 1, PP 1: LlamaForCausalLM.from_pretrained(DIR, dtype="float32").
- Otherwise a tensor-parallel model cannot be built on one CPU (fleet needs a device per
  rank), so the ranks are merged the way PaddleNLP merges them, with its own functions:
  LlamaForCausalLM._get_tensor_parallel_mappings(config, is_split=False) with its keys
  resolved by _resolve_prefix_keys (what convert_tensor_parallel and merge_tensor_parallel
  apply) per pipeline stage, the stages joined; the model is built at TP 1 and loaded with set_state_dict.
Either way every tensor of the model must have been loaded (nothing missing, nothing extra),
and the forward of LOGITS_INPUT_IDS (gen_paddlenlp_logits.py: eval, float32, no fused or flash
path) must give LOGITS_JSON's logits exactly.
"""

import json
import os
import re
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
os.environ.setdefault("PADDLE_SDK_DISABLE_TELEMETRY", "1")
import paddle  # noqa: E402
from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_paddlenlp_logits as glog  # noqa: E402

RANK_FILE = re.compile(r"^model_state(?:\.(?:tp(\d+))?_?(?:pp(\d+))?)?\.pdparams$")


def rank_files(d):
    files = {}
    for f in os.listdir(d):
        m = RANK_FILE.match(f)
        if m:
            files[(int(m.group(1) or 0), int(m.group(2) or 0))] = f
    tp = 1 + max(r for r, _ in files)
    pp = 1 + max(s for _, s in files)
    assert len(files) == tp * pp, f"{d}: {sorted(files)}"
    return files, tp, pp


def merged_state(d, files, tp, pp):
    """PaddleNLP's own merge: the is_split=False actions on each stage's TP ranks."""
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        cfg = LlamaConfig(**{k: v for k, v in json.load(f).items() if k != "architectures"})
    cfg.tensor_parallel_degree = tp
    actions = LlamaForCausalLM._get_tensor_parallel_mappings(cfg, is_split=False)
    state = {}
    for s in range(pp):
        ranks = [paddle.load(os.path.join(d, files[(r, s)]), return_numpy=True) for r in range(tp)]
        # the mappings name keys without the model prefix; PaddleNLP resolves them so
        resolved = LlamaForCausalLM._resolve_prefix_keys(actions.keys(), ranks[0].keys())
        actions.update({v: actions[k] for k, v in resolved.items()})
        for k in ranks[0]:
            parts = [x[k] for x in ranks]
            state[k] = actions[k](parts) if tp > 1 and k in actions else parts[0]
    return state


def check(logits_json, d):
    files, tp, pp = rank_files(d)
    if tp == 1 and pp == 1:
        model = LlamaForCausalLM.from_pretrained(d, dtype="float32")
        how = "from_pretrained"
    else:
        state = merged_state(d, files, tp, pp)
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            cfg = LlamaConfig(**{k: v for k, v in json.load(f).items() if k != "architectures"})
        cfg.tensor_parallel_degree = 1
        model = LlamaForCausalLM(cfg)
        want = set(model.state_dict())
        assert set(state) == want, f"{d}: missing {want - set(state)}, extra {set(state) - want}"
        model.set_state_dict({k: paddle.to_tensor(glog.as_float32(v)) for k, v in state.items()})
        how = f"_get_tensor_parallel_mappings(is_split=False) of {tp} TP ranks x {pp} stages"
    model.eval()
    logits, calls = glog.forward_logits(model)
    with open(logits_json, encoding="utf-8") as f:
        ref = np.array(json.load(f)["logits"], dtype=np.float32)
    diff = float(np.max(np.abs(logits - ref)))
    print(f"{d}: TP {tp}, PP {pp}, {how}: max |logits - reference| = {diff:g}")
    assert diff == 0.0, f"{d}: logits differ by {diff}"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for d in sys.argv[2:]:
        check(sys.argv[1], d)
    print("all equal")


if __name__ == "__main__":
    main()
