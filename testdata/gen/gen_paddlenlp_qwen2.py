"""Writes testdata/paddlenlp/qwen2_tp2/: testdata/hf/qwen2_tiny's weights as PaddleNLP 3's
Qwen2ForCausalLM holds them at tensor parallel 2, saved by fleet, one CPU process per rank
(gloo), the way PaddleNLP's Trainer saves a run without unified checkpoints:
save_pretrained(variant="tp00"/"tp01", merge_tensor_parallel=False, safe_serialization=False).
logits.json: the logits of PaddleNLP's own single-card forward on the same 8 ids as
qwen2_tiny's logits.json, and how far they are from transformers'.

Each rank builds the model at TP 2 and sets every parameter to its cut of the full value:
the HF tensor under PaddleNLP's name (model. -> qwen2.), nn.Linear weights transposed to
[in, out] (PaddleNLP's own _get_name_mappings), then cut along the axis the parallel layer
holds it on (is_distributed / split_axis). The tied lm_head is the embedding: PaddleNLP saves
it under both keys, lm_head.weight and qwen2.embed_tokens.weight, with one variable name.

Needs paddlepaddle 3.0.0 and paddlenlp 3.0.0b4 (README_paddlenlp3.md has the venv):
    python testdata/gen/gen_paddlenlp_qwen2.py
"""

import argparse
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
SRC = os.path.join(TESTDATA, "hf", "qwen2_tiny")
OUT = os.path.join(TESTDATA, "paddlenlp", "qwen2_tp2")
TP = 2
MODEL = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_attention_heads=4,
             num_key_value_heads=2, num_hidden_layers=2, max_position_embeddings=64, seq_length=64,
             rms_norm_eps=1e-5, rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
             tensor_parallel_output=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)


def hf_tensors():
    """qwen2_tiny's model.safetensors as numpy arrays (float32, read by hand: no torch here)."""
    with open(os.path.join(SRC, "model.safetensors"), "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(v["shape"])
    return out


def full_paddle_state():
    """PaddleNLP's names and layouts of qwen2_tiny's tensors."""
    out = {}
    for k, v in hf_tensors().items():
        assert k.startswith("model."), k
        name = "qwen2." + k[len("model."):]
        if v.ndim == 2 and not k.endswith("embed_tokens.weight"):
            v = v.T
        out[name] = np.ascontiguousarray(v)
    return out


def config(tp, rank):
    from paddlenlp.transformers import Qwen2Config

    cfg = Qwen2Config(**MODEL, tensor_parallel_degree=tp, tensor_parallel_rank=rank)
    cfg.architectures = ["Qwen2ForCausalLM"]
    return cfg


def set_weights(model, tp, rank):
    import paddle

    full = full_paddle_state()
    used = set()
    with paddle.no_grad():
        for key, p in model.state_dict().items():
            if key == "lm_head.weight" and MODEL["tie_word_embeddings"]:
                continue
            v = full[key]
            used.add(key)
            if getattr(p, "is_distributed", False) and tp > 1:
                v = np.split(v, tp, axis=p.split_axis)[rank]
            assert list(v.shape) == list(p.shape), (key, v.shape, p.shape)
            p.set_value(paddle.to_tensor(v))
    assert used == set(full), sorted(set(full) - used)


def worker(out):
    import paddle
    import paddle.distributed as dist
    from paddle.distributed import fleet

    paddle.set_device("cpu")
    if not hasattr(dist.ParallelEnv, "_device_id"):
        dist.ParallelEnv._device_id = 0
    strategy = fleet.DistributedStrategy()
    strategy.hybrid_configs = {"dp_degree": 1, "mp_degree": TP, "pp_degree": 1, "sharding_degree": 1}
    fleet.init(is_collective=True, strategy=strategy)
    rank = fleet.get_hybrid_communicate_group().get_model_parallel_rank()

    from paddlenlp.transformers import Qwen2ForCausalLM

    model = Qwen2ForCausalLM(config(TP, rank))
    set_weights(model, TP, rank)
    model.save_pretrained(out, variant="tp%02d" % rank, is_main_process=rank == 0, safe_serialization=False,
                          merge_tensor_parallel=False)
    print("rank tp%d saved" % rank)


def logits(ids):
    """PaddleNLP's single-card forward of the same weights (fleet's TP forward does not run on
    CPU: gloo refuses its calculation-stream all-reduce, see README_paddlenlp3.md)."""
    import paddle
    from paddlenlp.transformers import Qwen2ForCausalLM

    paddle.set_device("cpu")
    model = Qwen2ForCausalLM(config(1, 0))
    set_weights(model, 1, 0)
    model.eval()
    with paddle.no_grad():
        out = model(paddle.to_tensor([ids], dtype="int64"))
    out = out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)
    return out.numpy()[0].astype("float32")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", metavar="OUT")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker)
        return
    import paddle
    import paddlenlp

    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    with tempfile.TemporaryDirectory() as logs:
        cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(TP), "--log_dir", logs,
               __file__, "--worker", OUT]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            for name in sorted(os.listdir(logs)):
                if name.startswith("workerlog"):
                    sys.stderr.write(open(os.path.join(logs, name)).read()[-3000:])
            sys.exit("fleet run failed:\n%s" % (r.stdout[-2000:] + r.stderr[-2000:]))
    for name in os.listdir(OUT):
        if not name.endswith((".pdparams", ".json")):
            os.remove(os.path.join(OUT, name))

    # every rank file holds its cut of the HF tensors, nothing else; the tied head is saved
    # too, as the embedding (both keys name the same variable, embedding_0.w_0)
    full = full_paddle_state()
    full["lm_head.weight"] = full["qwen2.embed_tokens.weight"]
    for rank in range(TP):
        with open(os.path.join(OUT, "model_state.tp%02d.pdparams" % rank), "rb") as f:
            state = pickle.load(f)
        state.pop("StructuredToParameterName@@", None)
        assert set(state) == set(full), sorted(set(state) ^ set(full))
        for k, v in state.items():
            if v.shape != full[k].shape:
                axis = [i for i in range(v.ndim) if v.shape[i] != full[k].shape[i]][0]
                want = np.split(full[k], TP, axis=axis)[rank]
            else:
                want = full[k]
            assert np.array_equal(v, want), k

    ref = json.load(open(os.path.join(SRC, "logits.json")))
    got = logits(ref["input_ids"])
    diff = float(np.abs(got - np.array(ref["logits"], dtype="float32")).max())
    with open(os.path.join(OUT, "logits.json"), "w") as f:
        json.dump({
            "input_ids": ref["input_ids"],
            "logits": [[round(float(x), 7) for x in row] for row in got],
            "class": "Qwen2ForCausalLM",
            "max_abs_diff_to_transformers": diff,
            "paddlepaddle": paddle.__version__,
            "paddlenlp": paddlenlp.__version__,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
        }, f)
    print("wrote", OUT, sorted(os.listdir(OUT)), "max |paddlenlp - transformers| = %.3g" % diff)


if __name__ == "__main__":
    main()
