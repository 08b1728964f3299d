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

With --fused it writes testdata/paddlenlp/qwen2_tp2_fused instead: the same weights in the
model built with fuse_attention_qkv and fuse_attention_ffn true. PaddleNLP itself fuses and cuts
them (convert_fuse_and_split, then the split actions of _get_tensor_parallel_mappings: what its
from_pretrained does with an unfused single-card checkpoint), and the generator asserts the
layout those give: qkv_proj (weight and bias) per KV group [q heads of the group | k | v], a TP
rank holding whole groups (a plain column cut); gate_up_fused_proj [gate | up], rank r holding
[gate_r | up_r]. logits.json there holds the fused model's single-card forward on the first
FUSED_IDS ids only (the fixture must stay small), and how far it is from qwen2_tp2's.

Needs paddlepaddle 3.0.0 and paddlenlp 3.0.0b4 (README_paddlenlp3.md has the venv):
    python testdata/gen/gen_paddlenlp_qwen2.py [--fused]
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
OUT_FUSED = os.path.join(TESTDATA, "paddlenlp", "qwen2_tp2_fused")
TP = 2
FUSED_IDS = 4
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


def config(tp, rank, fused=False):
    from paddlenlp.transformers import Qwen2Config

    cfg = Qwen2Config(**MODEL, tensor_parallel_degree=tp, tensor_parallel_rank=rank,
                      fuse_attention_qkv=fused, fuse_attention_ffn=fused)
    cfg.architectures = ["Qwen2ForCausalLM"]
    return cfg


def fused_state(full):
    """full's tensors fused by PaddleNLP's own Qwen2 mappings (single card)."""
    from paddlenlp.transformers import Qwen2ForCausalLM

    state, _ = Qwen2ForCausalLM.convert_fuse_and_split(config(1, 0, True), dict(full))
    return {k: np.asarray(v) for k, v in state.items()}


def rank_state(full, tp, rank, fused):
    """Rank rank's tensors: fused (PaddleNLP's mappings) and cut by PaddleNLP's split actions."""
    from paddlenlp.transformers import Qwen2ForCausalLM

    if not fused:
        return full, None
    state = fused_state(full)
    if tp == 1:
        return state, state
    actions = Qwen2ForCausalLM.get_tensor_parallel_convert_actions(config(tp, rank, True), list(state))
    return {k: np.asarray(actions[k](v)) if k in actions else v for k, v in state.items()}, state


def set_weights(model, tp, rank, fused=False):
    import paddle

    full = full_paddle_state()
    cut, whole = rank_state(full, tp, rank, fused)
    used = set()
    with paddle.no_grad():
        for key, p in model.state_dict().items():
            if key == "lm_head.weight" and MODEL["tie_word_embeddings"]:
                continue
            v = cut[key]
            used.add(key)
            if not fused and getattr(p, "is_distributed", False) and tp > 1:
                v = np.split(v, tp, axis=p.split_axis)[rank]
            assert list(v.shape) == list(p.shape), (key, v.shape, p.shape)
            p.set_value(paddle.to_tensor(v))
    assert used == set(cut), sorted(set(cut) - used)
    return whole


def check_fused_layout(full, whole, cut, tp, rank):
    """The layout PaddleNLP's mappings gave, in plain numpy: qkv_proj (weight and bias) per KV
    group [q heads of the group | k | v], whole groups per rank; gate_up_fused_proj [gate | up],
    rank r [gate_r | up_r]."""
    heads, kv = MODEL["num_attention_heads"], MODEL["num_key_value_heads"]
    hd = MODEL["hidden_size"] // heads
    g = heads // kv
    for layer in range(MODEL["num_hidden_layers"]):
        p = "qwen2.layers.%d." % layer
        for kind in ("weight", "bias"):
            q, k, v = (full[p + "self_attn.%s_proj.%s" % (x, kind)] for x in "qkv")
            lead = q.shape[:-1]
            groups = [np.concatenate([q[..., i * g * hd:(i + 1) * g * hd], k[..., i * hd:(i + 1) * hd],
                                      v[..., i * hd:(i + 1) * hd]], axis=-1) for i in range(kv)]
            want = np.concatenate(groups, axis=-1)
            assert np.array_equal(whole[p + "self_attn.qkv_proj." + kind], want), (p, kind)
            n = want.shape[-1] // tp
            assert np.array_equal(cut[p + "self_attn.qkv_proj." + kind], want[..., rank * n:(rank + 1) * n])
            assert want.shape == lead + ((heads + 2 * kv) * hd,)
        gate, up = full[p + "mlp.gate_proj.weight"], full[p + "mlp.up_proj.weight"]
        assert np.array_equal(whole[p + "mlp.gate_up_fused_proj.weight"], np.concatenate([gate, up], axis=1))
        n = gate.shape[1] // tp
        want = np.concatenate([gate[:, rank * n:(rank + 1) * n], up[:, rank * n:(rank + 1) * n]], axis=1)
        assert np.array_equal(cut[p + "mlp.gate_up_fused_proj.weight"], want), p


def worker(out, fused):
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

    model = Qwen2ForCausalLM(config(TP, rank, fused))
    set_weights(model, TP, rank, fused)
    model.save_pretrained(out, variant="tp%02d" % rank, is_main_process=rank == 0, safe_serialization=False,
                          merge_tensor_parallel=False)
    print("rank tp%d saved" % rank)


def logits(ids, fused=False):
    """PaddleNLP's single-card forward of the same weights (fleet's TP forward does not run on
    CPU: gloo refuses its calculation-stream all-reduce, see README_paddlenlp3.md)."""
    import paddle
    from paddlenlp.transformers import Qwen2ForCausalLM

    paddle.set_device("cpu")
    model = Qwen2ForCausalLM(config(1, 0, fused))
    set_weights(model, 1, 0, fused)
    model.eval()
    with paddle.no_grad():
        out = model(paddle.to_tensor([ids], dtype="int64"))
    out = out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)
    return out.numpy()[0].astype("float32")


def check_saved(out, fused):
    """Every rank file holds its cut of the HF tensors (fused as PaddleNLP fuses them), nothing
    else; the tied head is saved too, as the embedding (both keys name the same variable,
    embedding_0.w_0)."""
    base = full_paddle_state()
    for rank in range(TP):
        full, whole = rank_state(base, TP, rank, fused)
        full = dict(full)
        full["lm_head.weight"] = full["qwen2.embed_tokens.weight"]
        if fused:
            check_fused_layout(base, whole, full, TP, rank)
        with open(os.path.join(out, "model_state.tp%02d.pdparams" % rank), "rb") as f:
            state = pickle.load(f)
        state.pop("StructuredToParameterName@@", None)
        assert set(state) == set(full), sorted(set(state) ^ set(full))
        for k, v in state.items():
            if not fused and v.shape != full[k].shape:
                axis = [i for i in range(v.ndim) if v.shape[i] != full[k].shape[i]][0]
                want = np.split(full[k], TP, axis=axis)[rank]
            else:
                want = full[k]
            assert np.array_equal(v, want), k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", metavar="OUT")
    ap.add_argument("--fused", action="store_true", help="fuse_attention_qkv and fuse_attention_ffn true")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.fused)
        return
    import paddle
    import paddlenlp

    out = OUT_FUSED if a.fused else OUT
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    with tempfile.TemporaryDirectory() as logs:
        cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", str(TP), "--log_dir", logs,
               __file__, "--worker", out] + (["--fused"] if a.fused else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            for name in sorted(os.listdir(logs)):
                if name.startswith("workerlog"):
                    sys.stderr.write(open(os.path.join(logs, name)).read()[-3000:])
            sys.exit("fleet run failed:\n%s" % (r.stdout[-2000:] + r.stderr[-2000:]))
    for name in os.listdir(out):
        if not name.endswith((".pdparams", ".json")):
            os.remove(os.path.join(out, name))
    check_saved(out, a.fused)

    ref = json.load(open(os.path.join(SRC, "logits.json")))
    ids = ref["input_ids"][:FUSED_IDS] if a.fused else ref["input_ids"]
    got = logits(ids, a.fused)
    diff = float(np.abs(got - np.array(ref["logits"][:len(ids)], dtype="float32")).max())
    extra = {}
    if a.fused:
        unfused = json.load(open(os.path.join(OUT, "logits.json")))["logits"][:len(ids)]
        extra["max_abs_diff_to_unfused_paddlenlp"] = float(np.abs(got - np.array(unfused, dtype="float32")).max())
    with open(os.path.join(out, "logits.json"), "w") as f:
        json.dump({
            "input_ids": ids,
            "logits": [[round(float(x), 7) for x in row] for row in got],
            "class": "Qwen2ForCausalLM",
            "max_abs_diff_to_transformers": diff,
            **extra,
            "paddlepaddle": paddle.__version__,
            "paddlenlp": paddlenlp.__version__,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
        }, f)
    print("wrote", out, sorted(os.listdir(out)), "max |paddlenlp - transformers| = %.3g" % diff, extra)


if __name__ == "__main__":
    main()
