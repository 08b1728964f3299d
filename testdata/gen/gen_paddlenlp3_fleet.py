"""Writes testdata/paddlenlp/fleet3_<case>/: a tiny PaddleNLP 3 LLaMA trained one step by fleet,
one CPU process per rank (gloo), at TP 1, TP 2, PP 2 and PP 3, and saved the way PaddleNLP's
Trainer saves a run without unified checkpoints: save_pretrained(variant=<rank suffix>) of the
model and paddle.save of the optimizer's state_dict per rank.

These are the files real pipeline runs write: every process builds only its own layers, so the
variable names of each stage start from 0 (stage 1 of PP 2 holds linear_0.w_0), and the head
of LlamaForCausalLMPipe is llama_lm_head_pipe_0.w_0.

Needs paddlepaddle 3.0.0 and paddlenlp 3.0.0b4 (README_paddlenlp3.md):
    python testdata/gen/gen_paddlenlp3_fleet.py          # all cases, ~2 min on 2 CPU cores
It starts `python -m paddle.distributed.launch` once per case, which runs this file with
--worker CASE OUT in every rank's process, then checks the saved files and writes expected.json.
"""

import argparse
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings
import zlib

import numpy as np

warnings.simplefilter("ignore")
os.environ.setdefault("PADDLE_SDK_DISABLE_TELEMETRY", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "paddlenlp")
CASES = {"tp1": (1, 1), "tp2": (2, 1), "pp2": (1, 2), "pp3": (1, 3)}
MODEL = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_attention_heads=4,
             num_key_value_heads=2, num_hidden_layers=5, max_position_embeddings=64,
             seq_length=64, tensor_parallel_output=False)


def suffix(tp, tp_rank, pp, pp_rank):
    """TrainingArguments.weight_name_suffix of a run without sharding: tpXX when TP > 1,
    ppXX when PP > 1, joined by '_'; nothing on a single card."""
    parts = []
    if tp > 1:
        parts.append("tp%02d" % tp_rank)
    if pp > 1:
        parts.append("pp%02d" % pp_rank)
    return "_".join(parts) or None


def init_value(key, shape):
    """The value of parameter `key` at its full shape: matrices 0.02*N(0,1), RMSNorm
    weights 1+0.1*N(0,1), from a generator seeded by the structured name, so that every
    layout starts from the same model."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    if len(shape) == 1:
        return (1 + 0.1 * rng.standard_normal(shape)).astype("float32")
    return (0.02 * rng.standard_normal(shape)).astype("float32")


def part(key, p, tp, mp_rank, what):
    """init_value of p (what "init"), or its gradient ("grad"), at the full shape, cut for
    TP rank mp_rank the way the parallel layer holds it."""
    shape = list(p.shape)
    axis = getattr(p, "split_axis", None) if getattr(p, "is_distributed", False) else None
    if axis is not None:
        shape[axis] *= tp
    full = init_value(key, shape) if what == "init" else init_value("grad:" + key, shape) * 50
    return np.split(full, tp, axis=axis)[mp_rank] if axis is not None else full


def build(tp, pp):
    """LlamaForCausalLM (LlamaForCausalLMPipe when pp > 1) of this process's rank of a fleet
    run with TP tp and PP pp, and (mp rank, stage)."""
    import paddle
    import paddle.distributed as dist
    from paddle.distributed import fleet

    paddle.set_device("cpu")
    paddle.seed(7)
    mp_rank = pp_rank = 0
    if tp * pp > 1:
        # paddle 3.0's CPU build never sets ParallelEnv._device_id, which PipelineLayer reads
        if not hasattr(dist.ParallelEnv, "_device_id"):
            dist.ParallelEnv._device_id = 0
        if tp * pp > 2:
            # gloo on one machine fails to connect a group of three processes past the global
            # one ("connect [127.0.0.1]:N: Connection refused"); nothing here communicates, so
            # fleet's groups get one that does nothing (topology.py's warm-up all_reduce is the
            # only call)
            from paddle.distributed import collective

            class Done:
                def wait(self):
                    return True

            class NoComm:
                def all_reduce(self, *args, **kwargs):
                    return Done()

            collective._new_process_group_impl = lambda *args, **kwargs: NoComm()
        strategy = fleet.DistributedStrategy()
        strategy.hybrid_configs = {"dp_degree": 1, "mp_degree": tp, "pp_degree": pp, "sharding_degree": 1}
        strategy.pipeline_configs = {"accumulate_steps": 2, "micro_batch_size": 1}
        fleet.init(is_collective=True, strategy=strategy)
        hcg = fleet.get_hybrid_communicate_group()
        mp_rank, pp_rank = hcg.get_model_parallel_rank(), hcg.get_stage_id()

    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM, LlamaForCausalLMPipe

    cfg = LlamaConfig(**MODEL, tensor_parallel_degree=tp, tensor_parallel_rank=mp_rank)
    return (LlamaForCausalLMPipe if pp > 1 else LlamaForCausalLM)(cfg), mp_rank, pp_rank


def step(model, tp, mp_rank, opt):
    """One AdamW step with the given gradients (see worker)."""
    import paddle

    loss = 0
    for key, p in model.state_dict().items():
        loss = loss + (p * paddle.to_tensor(part(key, p, tp, mp_rank, "grad"))).sum()
    loss.backward()
    opt.step()
    return loss


def worker(case, out):
    import paddle

    tp, pp = CASES[case]
    model, mp_rank, pp_rank = build(tp, pp)
    with paddle.no_grad():
        for key, p in model.state_dict().items():
            p.set_value(paddle.to_tensor(part(key, p, tp, mp_rank, "init")))

    # fleet cannot run the model's forward on CPU: its parallel layers all-reduce on the
    # calculation stream, which gloo refuses ("ProcessGroupGLOO does not support all_reduce
    # with sync_op and use_calc_stream"), and the pipeline schedule is built on them. So the
    # step's gradients are given: loss = sum(p * g), g a fixed value per structured name (cut
    # like its parameter), which makes AdamW's update, elementwise, the same at every layout.
    sched = paddle.optimizer.lr.CosineAnnealingDecay(1e-3, T_max=10)
    opt = paddle.optimizer.AdamW(learning_rate=sched, parameters=model.parameters(), weight_decay=0.01)
    loss = step(model, tp, mp_rank, opt)
    sched.step()
    print("case %s rank tp%d pp%d loss %s" % (case, mp_rank, pp_rank, float(loss)))

    variant = suffix(tp, mp_rank, pp, pp_rank)
    is_main = mp_rank == 0 and pp_rank == 0
    model.save_pretrained(out, variant=variant, is_main_process=is_main, safe_serialization=False,
                          merge_tensor_parallel=False)
    paddle.save(opt.state_dict(), os.path.join(out, "optimizer.%s.pdopt" % variant if variant else "optimizer.pdopt"))


def versions():
    out = subprocess.run([sys.executable, "-c", "import paddle, paddlenlp, numpy, sys; "
                          "print(paddle.__version__, paddlenlp.__version__, numpy.__version__, sys.version.split()[0])"],
                         check=True, capture_output=True, text=True).stdout.split()
    return {"paddlepaddle": out[0], "paddlenlp": out[1], "numpy": out[2], "python": out[3]}


def describe(d, case, vers):
    """expected.json: the versions, and per file its tensors (name, shape, sha256 of the
    float32 bytes) and name table, read with plain pickle (paddle.load drops the table)."""
    files = {}
    for name in sorted(os.listdir(d)):
        if not name.endswith((".pdparams", ".pdopt")):
            continue
        with open(os.path.join(d, name), "rb") as f:
            state = pickle.load(f)
        recs, table = [], state.pop("StructuredToParameterName@@", None)
        for k, v in state.items():
            if isinstance(v, np.ndarray):
                recs.append({"name": k, "shape": list(v.shape),
                             "sha256": hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()})
        files[name] = {"tensors": recs, "name_table": table}
    tp, pp = CASES[case]
    return {"case": case, "tp": tp, "pp": pp, "versions": vers, "model": MODEL, "files": files}


def check_stage_local_names(expected):
    """What the fixtures are for: a stage's variable names start from 0."""
    files = expected["files"]
    if expected["pp"] > 1:
        last = "model_state.pp%02d.pdparams" % (expected["pp"] - 1)
        table = files[last]["name_table"]
        assert table["lm_head.weight"] == "llama_lm_head_pipe_0.w_0", table["lm_head.weight"]
        assert "linear_0.w_0" in table.values(), sorted(table.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=2, metavar=("CASE", "OUT"))
    ap.add_argument("cases", nargs="*", default=sorted(CASES))
    a = ap.parse_args()
    if a.worker:
        worker(*a.worker)
        return
    vers = versions()
    for case in a.cases:
        tp, pp = CASES[case]
        d = os.path.join(OUT, "fleet3_" + case)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with tempfile.TemporaryDirectory() as logs:
            if tp * pp == 1:
                cmd = [sys.executable, __file__, "--worker", case, d]
            else:
                cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(tp * pp),
                       "--log_dir", logs, __file__, "--worker", case, d]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                for name in sorted(os.listdir(logs)):
                    if name.startswith("workerlog"):
                        sys.stderr.write(open(os.path.join(logs, name)).read()[-3000:])
                sys.exit("case %s failed:\n%s" % (case, r.stdout[-2000:] + r.stderr[-2000:]))
            for name in sorted(os.listdir(logs)):
                for line in open(os.path.join(logs, name)):
                    if line.startswith("case "):
                        print(line.rstrip())
        for name in os.listdir(d):
            if not name.endswith((".pdparams", ".pdopt", ".json")):
                os.remove(os.path.join(d, name))
        expected = describe(d, case, vers)
        check_stage_local_names(expected)
        with open(os.path.join(d, "expected.json"), "w") as f:
            json.dump(expected, f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote", d, sorted(os.listdir(d)))


if __name__ == "__main__":
    main()
