"""PaddleNLP 3 loads the Qwen2 checkpoints ckptconv writes and gives the same logits.

Run by hand in the pp-paddle3 environment of README_paddlenlp3.md (paddlepaddle 3.0.0,
paddlenlp 3.0.0b4; PaddleNLP does not install in CI); the output is check_paddle_qwen2.log:

    python testdata/gen/check_paddle_qwen2.py CKPTCONV

It writes, into a temporary directory, with CKPTCONV:
  hf2paddle   testdata/hf/qwen2_tiny --tp 2            (TP 2: model_state.tp0X.pdparams)
  reshard     that --tp 1                              (TP 1: model_state.pdparams)
  reshard     testdata/paddlenlp/qwen2_tp2 --tp 2 --pp 2
and checks with PaddleNLP itself:
  - TP 2, loaded by PaddleNLP's own tensor-parallel loader: two fleet processes (CPU, gloo)
    each run Qwen2ForCausalLM.from_pretrained(DIR, tensor_parallel_degree=2,
    tensor_parallel_rank=r), which reads model_state.tp0r.pdparams into the TP-2 layers; every
    parameter must hold its cut of qwen2_tiny's tensors (so none was left at its random init) (a TP forward does not run on CPU: gloo refuses its calculation-stream all-reduce);
  - TP 2, merged the way PaddleNLP merges ranks (Qwen2ForCausalLM._get_tensor_parallel_mappings
    (is_split=False)), loaded at TP 1: the forward of qwen2_tiny's ids gives
    testdata/paddlenlp/qwen2_tp2/logits.json (PaddleNLP's own logits of the same weights);
  - TP 1: Qwen2ForCausalLM.from_pretrained(DIR): the same logits;
  - TP 2 PP 2: PaddleNLP's pipeline names (Qwen2ForCausalLMPipe in config.json) and the
    stages merged, the same logits.
"""

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

warnings.simplefilter("ignore")
os.environ.setdefault("PADDLE_SDK_DISABLE_TELEMETRY", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
HF = os.path.join(TESTDATA, "hf", "qwen2_tiny")
FIXTURE = os.path.join(TESTDATA, "paddlenlp", "qwen2_tp2")
sys.path.insert(0, HERE)
import gen_paddlenlp_qwen2 as gen  # noqa: E402


def rank_file(d, tp, pp, r, s):
    name = "model_state"
    if tp > 1 or pp > 1:
        name += "." + ("tp%02d" % r if tp > 1 else "") + ("_" if tp > 1 and pp > 1 else "") + \
            ("pp%02d" % s if pp > 1 else "")
    return os.path.join(d, name + ".pdparams")


def load_config(d, tp):
    from paddlenlp.transformers import Qwen2Config

    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        cfg = Qwen2Config(**{k: v for k, v in json.load(f).items() if k != "architectures"})
    cfg.tensor_parallel_degree = tp
    cfg.tensor_parallel_output = False
    return cfg


def worker(d):
    """One TP rank: PaddleNLP's from_pretrained of our rank file at TP 2."""
    import paddle
    import paddle.distributed as dist
    from paddle.distributed import fleet

    paddle.set_device("cpu")
    if not hasattr(dist.ParallelEnv, "_device_id"):
        dist.ParallelEnv._device_id = 0
    strategy = fleet.DistributedStrategy()
    strategy.hybrid_configs = {"dp_degree": 1, "mp_degree": 2, "pp_degree": 1, "sharding_degree": 1}
    fleet.init(is_collective=True, strategy=strategy)
    rank = fleet.get_hybrid_communicate_group().get_model_parallel_rank()

    from paddlenlp.transformers import Qwen2ForCausalLM

    model = Qwen2ForCausalLM.from_pretrained(d, dtype="float32", tensor_parallel_degree=2, tensor_parallel_rank=rank)
    full = gen.full_paddle_state()
    full["lm_head.weight"] = full["qwen2.embed_tokens.weight"]
    bad = []
    for k, p in model.state_dict().items():
        v = full[k]
        if getattr(p, "is_distributed", False):
            v = np.split(v, 2, axis=p.split_axis)[rank]
        if list(v.shape) != list(p.shape) or not np.array_equal(p.numpy(), v):
            bad.append(k)
    print("rank %d: %d parameters loaded by from_pretrained at TP 2, differing from qwen2_tiny's cut: %s"
          % (rank, len(model.state_dict()), bad))
    assert not bad


def fleet_load(d):
    with tempfile.TemporaryDirectory() as logs:
        cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir", logs,
               __file__, "--worker", d]
        r = subprocess.run(cmd, capture_output=True, text=True)
        out = ""
        for name in sorted(os.listdir(logs)):
            if name.startswith("workerlog"):
                text = open(os.path.join(logs, name)).read()
                out += "".join(line + "\n" for line in text.splitlines() if line.startswith("rank "))
                if r.returncode != 0:
                    sys.stderr.write(text[-3000:])
        if r.returncode != 0:
            sys.exit("fleet run failed")
        return out


def merged_state(d, tp, pp):
    """PaddleNLP's own merge: the is_split=False actions on each stage's TP ranks."""
    import paddle
    from paddlenlp.transformers import Qwen2ForCausalLM

    actions = Qwen2ForCausalLM._get_tensor_parallel_mappings(load_config(d, tp), is_split=False)
    state = {}
    for s in range(pp):
        ranks = [paddle.load(rank_file(d, tp, pp, r, s), return_numpy=True) for r in range(tp)]
        resolved = Qwen2ForCausalLM._resolve_prefix_keys(actions.keys(), ranks[0].keys())
        actions.update({v: actions[k] for k, v in resolved.items()})
        for k in ranks[0]:
            parts = [x[k] for x in ranks]
            state[k] = actions[k](parts) if tp > 1 and k in actions else parts[0]
    return state


def logits_of(model):
    import paddle

    ids = json.load(open(os.path.join(HF, "logits.json")))["input_ids"]
    model.eval()
    with paddle.no_grad():
        out = model(paddle.to_tensor([ids], dtype="int64"))
    out = out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)
    return out.numpy()[0].astype("float32")


def check_logits(d, tp, pp):
    import paddle
    from paddlenlp.transformers import Qwen2ForCausalLM

    if tp == 1 and pp == 1:
        model = Qwen2ForCausalLM.from_pretrained(d, dtype="float32")
        how = "from_pretrained"
    else:
        state = merged_state(d, tp, pp)
        model = Qwen2ForCausalLM(load_config(d, 1))
        want = set(model.state_dict())
        # the tied head is the embedding: a file without lm_head.weight is complete
        missing = want - set(state) - {"lm_head.weight"}
        assert not missing and not set(state) - want, (missing, set(state) - want)
        model.set_state_dict({k: paddle.to_tensor(v) for k, v in state.items()})
        how = "_get_tensor_parallel_mappings(is_split=False) of %d TP ranks x %d stages" % (tp, pp)
    ref = np.array(json.load(open(os.path.join(FIXTURE, "logits.json")))["logits"], dtype=np.float32)
    diff = float(np.max(np.abs(logits_of(model) - ref)))
    print("%s: TP %d, PP %d, %s: max |logits - PaddleNLP's| = %g" % (os.path.basename(d), tp, pp, how, diff))
    assert diff <= 1e-6, diff


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    import paddle
    import paddlenlp

    paddle.set_device("cpu")
    print("paddlepaddle %s, paddlenlp %s, numpy %s, Python %s" % (paddle.__version__, paddlenlp.__version__,
                                                                 np.__version__, sys.version.split()[0]))
    bin_ = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp()
    try:
        tp2, tp1, pp2 = (os.path.join(work, n) for n in ("hf2paddle_tp2", "reshard_tp1", "reshard_tp2pp2"))
        for args in (["hf2paddle", HF, tp2, "--tp", "2"], ["reshard", tp2, tp1, "--tp", "1"],
                     ["reshard", FIXTURE, pp2, "--tp", "2", "--pp", "2"]):
            subprocess.run([bin_] + args + ["-q"], check=True)
            print("ckptconv " + " ".join(os.path.relpath(a, TESTDATA) if a.startswith(TESTDATA) else
                                         os.path.basename(a) if a.startswith(work) else a for a in args))
        print(fleet_load(tp2), end="")
        check_logits(tp2, 2, 1)
        check_logits(tp1, 1, 1)
        check_logits(pp2, 2, 2)
        with open(os.path.join(pp2, "config.json")) as f:
            print("reshard_tp2pp2 architectures:", json.load(f)["architectures"])
        print("all equal")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
