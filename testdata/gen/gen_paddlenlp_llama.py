"""Writes testdata/llama/<case>/: tiny PaddleNLP LLaMA checkpoints saved by PaddleNLP itself,
for `ckptconv pd2te` / `te2pd`, with the expected Transformer Engine tensors.

Needs paddlepaddle 2.6 and paddlenlp 2.8 (see README_paddlenlp.md for the environment):
    python testdata/gen/gen_paddlenlp_llama.py

The model is PaddleNLP's own LlamaForCausalLM (vocab 128, hidden 64, intermediate 128,
4 heads, 2 KV heads); its parameters are then set from a fixed numpy generator so that every
tensor, the RMSNorm weights included, is distinct. Every case directory gets expected_te.json:
the tensors of each input file and of the file pd2te must write (name, dtype, shape, sha256
of the raw bytes), computed by tests/interop/llama_te_reference.py. The generator also checks
that te2pd of that output gives the input back bit for bit.
"""

import argparse
import collections
import copy
import json
import os
import pickle
import platform
import shutil
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
os.environ.setdefault("PADDLE_SDK_DISABLE_TELEMETRY", "1")
import paddle  # noqa: E402
import paddlenlp  # noqa: E402
from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from paddlenlp.transformers.conversion_utils import fuse_param_func, split_param_func  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(os.path.dirname(TESTDATA), "tests", "interop"))
import llama_te_reference as ref  # noqa: E402

OUT = os.path.join(TESTDATA, "llama")
NH, NKV = 4, 2
BASE = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_attention_heads=NH,
            num_key_value_heads=NKV, max_position_embeddings=128, seq_length=128)

TOKENIZER_CONFIG = {
    "tokenizer_class": "LlamaTokenizer",
    "model_max_length": 128,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": "<unk>",
    "add_bos_token": True,
    "add_eos_token": False,
}


def versions():
    return {"python": platform.python_version(), "numpy": np.__version__,
            "paddlepaddle": paddle.__version__, "paddlenlp": paddlenlp.__version__}


def config(layers, fuse_qkv=False, fuse_ffn=True):
    return LlamaConfig(num_hidden_layers=layers, fuse_attention_qkv=fuse_qkv,
                       fuse_attention_ffn=fuse_ffn, dtype="float32", **BASE)


def build(cfg, seed, weights=None):
    """LlamaForCausalLM on CPU with deterministic variable names; parameters from `weights`
    (name -> ndarray) or from a numpy generator seeded with `seed`."""
    paddle.seed(seed)
    with paddle.utils.unique_name.guard():
        m = LlamaForCausalLM(cfg)
    rng = np.random.default_rng(seed)
    for name, p in m.state_dict().items():
        if weights is not None:
            a = weights[name]
        elif p.ndim == 1:
            a = 1.0 + 0.1 * rng.standard_normal(p.shape)
        else:
            a = 0.02 * rng.standard_normal(p.shape)
        assert tuple(a.shape) == tuple(p.shape), (name, a.shape, p.shape)
        p.set_value(np.asarray(a, dtype=np.float32))
    m.eval()
    return m


def numpy_state(m):
    return collections.OrderedDict((k, v.numpy()) for k, v in m.state_dict().items())


def logits(m):
    ids = paddle.to_tensor([[1, 5, 9, 33, 77, 127, 2, 64]])
    with paddle.no_grad():
        out = m(ids)
    return (out[0] if isinstance(out, (tuple, list)) else out).numpy()


def case_dir(name):
    d = os.path.join(OUT, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


def save_state(state, path, var_names=None):
    """paddle.save of a state dict whose values are all paddle Tensors (format variant A).
    var_names (key -> paddle variable name) fixes the name table; otherwise the tensors keep
    theirs."""
    wrapped = collections.OrderedDict()
    for k, v in state.items():
        if not isinstance(v, paddle.Tensor):
            v = paddle.Tensor(np.ascontiguousarray(v), zero_copy=False, place=paddle.CPUPlace())
        if var_names is not None:
            v.name = var_names[k]
        wrapped[k] = v
    paddle.save(wrapped, path)


def save_pretrained(m, d, **kw):
    with paddle.utils.unique_name.guard():
        m.save_pretrained(d, **kw)


def save_config(cfg, d):
    """config.json as save_pretrained writes it (with architectures), for the files written
    by hand."""
    cfg = copy.deepcopy(cfg)
    cfg.architectures = ["LlamaForCausalLM"]
    cfg.save_pretrained(d)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def load(path):
    return ref.load_pdparams(path)


def same(a, b):
    """Same names and the same bytes, dtypes and shapes (order not compared)."""
    if set(a) != set(b):
        return False
    return all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
               and a[k].tobytes() == b[k].tobytes() for k in a)


def check_inverse(pd, te, tp, fuse_qkv, fuse_ffn, what):
    back = ref.te_to_pd(te, NH, NKV, tp, fuse_qkv=fuse_qkv, fuse_ffn=fuse_ffn)
    assert same(back, pd), f"{what}: te2pd(pd2te(x)) != x"


def describe(d, case, description, tp, layout, pd_files, te_files, index=None, te_index=None):
    exp = {
        "case": case,
        "description": description,
        "versions": versions(),
        "num_attention_heads": NH,
        "num_key_value_heads": NKV,
        "tensor_parallel_degree": tp,
        "fuse_attention_qkv": layout[0],
        "fuse_attention_ffn": layout[1],
        "input": {f: ref.records(s) for f, s in pd_files.items()},
        "te": {f: ref.records(s) for f, s in te_files.items()},
    }
    if index is not None:
        exp["input_index"] = index
        exp["te_index"] = te_index
    write_json(os.path.join(d, "expected_te.json"), exp)


def convert_case(d, case, description, tp=1, layout=(False, True)):
    """pd2te of every model_state*.pdparams of d, file by file, plus the inverse check."""
    pd_files, te_files = collections.OrderedDict(), collections.OrderedDict()
    for f in ref.model_files(d):
        pd = load(os.path.join(d, f))
        te = ref.pd_to_te(pd, NH, NKV, tp)
        check_inverse(pd, te, tp, layout[0], layout[1], f"{case}/{f}")
        pd_files[f], te_files[f] = pd, te
    describe(d, case, description, tp, layout, pd_files, te_files)
    return te_files


# ---------------------------------------------------------------------------------------

def gen_fp32_tp1(base):
    d = case_dir("fp32_tp1")
    save_pretrained(base, d)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(TOKENIZER_CONFIG, f, indent=2)
        f.write("\n")
    gen_optimizer(base, os.path.join(d, "optimizer.pdopt"))
    assert same(load(os.path.join(d, "model_state.pdparams")), numpy_state(base))
    return convert_case(d, "fp32_tp1", "save_pretrained, float32, 2 layers, GQA 4/2, "
                        "fuse_attention_ffn; with generation_config.json, tokenizer_config.json "
                        "and optimizer.pdopt (not weights)")


def gen_optimizer(base, path):
    """A real AdamW step over the RMSNorm weights only (keeps the file small): moments, beta
    pow accumulators and the LR scheduler state."""
    with paddle.utils.unique_name.guard():
        m = build(config(2), 0)
        m.train()
        params = [p for p in m.parameters() if p.ndim == 1]
        sched = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=1e-3, T_max=10)
        opt = paddle.optimizer.AdamW(learning_rate=sched, parameters=params, weight_decay=0.01)
        out = m(paddle.to_tensor([[1, 2, 3, 4]]))
        loss = (out[0] if isinstance(out, (tuple, list)) else out).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        sched.step()
        paddle.save(opt.state_dict(), path)


def gen_bf16_tp1(base_state):
    d = case_dir("bf16_tp1")
    m = build(config(2), 0, base_state)
    m.to(dtype="bfloat16")
    save_pretrained(m, d)
    with open(os.path.join(d, "model_state.pdparams"), "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    arrays = [v for v in raw.values() if isinstance(v, np.ndarray)]
    assert arrays and all(a.dtype.str == "<u2" for a in arrays), "bf16 is not stored as u2"
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["dtype"] == "bfloat16"
    return convert_case(d, "bf16_tp1", "the fp32_tp1 model cast to bfloat16 (stored as numpy u2), "
                        "save_pretrained")


def gen_fp32_tp2(base, te_tp1):
    """TP=2 shard files split by PaddleNLP's convert_tensor_parallel, in one process."""
    d = case_dir("fp32_tp2")
    sd = numpy_state(base)
    var_names = {k: v.name for k, v in base.state_dict().items()}
    cfg = config(2)
    for r in range(2):
        c = copy.deepcopy(cfg)
        c.tensor_parallel_degree, c.tensor_parallel_rank = 2, r
        part = LlamaForCausalLM.convert_tensor_parallel(None, c, state_dict=dict(sd))
        # convert_tensor_parallel re-inserts the split keys last; a TP run saves in model order.
        part = collections.OrderedDict((k, part[k]) for k in sd)
        # Names in the table: the TP=1 model's variable names (convert_tensor_parallel's
        # tensors get run-dependent generated_tensor_N names).
        save_state(part, os.path.join(d, f"model_state.tp{r:02d}.pdparams"), var_names)
    save_config(cfg, d)
    te = convert_case(d, "fp32_tp2", "the fp32_tp1 model split for tensor_parallel_degree=2 "
                      "by PaddleNLP convert_tensor_parallel", tp=2)
    check_tp_against_te_split(te_tp1["model_state.pdparams"], te, 2)
    return te


def check_tp_against_te_split(full, shards, tp):
    """Each converted TP file equals the TP=1 conversion split the way TE splits its
    parameters (te backend: column-parallel weights on axis 0, row-parallel on axis 1,
    layernorm_qkv per q/k/v section)."""
    d = BASE["hidden_size"] // NH
    for r in range(tp):
        shard = shards[f"model_state.tp{r:02d}.pdparams"]
        for name, a in full.items():
            i, suffix = ref.split_layer_name(name)
            if suffix == ref.TE_QKV:
                q, k, v = np.split(a, [NH * d, NH * d + NKV * d], axis=0)
                want = np.concatenate([np.split(x, tp, axis=0)[r] for x in (q, k, v)], axis=0)
            elif suffix == ref.TE_FC1:
                gate, up = np.split(a, 2, axis=0)
                want = np.concatenate([np.split(x, tp, axis=0)[r] for x in (gate, up)], axis=0)
            elif suffix in ("transformer.self_attention.proj.weight",
                            "transformer.layernorm_mlp.fc2_weight"):
                want = np.split(a, tp, axis=1)[r]
            elif name == "llama.embed_tokens.weight":
                want = np.split(a, tp, axis=0)[r]
            elif name == "lm_head.weight":
                want = np.split(a, tp, axis=1)[r]
            else:
                want = a
            assert np.array_equal(shard[name], want), f"tp{r}: {name}"


def gen_fused_qkv(base, base_state, te_tp1):
    """fuse_attention_qkv=True: qkv_proj made by PaddleNLP's own fuse_param_func."""
    d = case_dir("fused_qkv_tp1")
    fuse = fuse_param_func()
    w = collections.OrderedDict()
    for name, a in base_state.items():
        i, suffix = ref.split_layer_name(name)
        if suffix == ref.Q:
            p = f"llama.layers.{i}.self_attn."
            w[p + "qkv_proj.weight"] = fuse([a, base_state[p + "k_proj.weight"],
                                             base_state[p + "v_proj.weight"]],
                                            is_qkv=True, num_heads=NH, num_key_value_heads=NKV)
        elif suffix not in (ref.K, ref.V):
            w[name] = a
    m = build(config(2, fuse_qkv=True), 0, w)
    assert np.allclose(logits(m), logits(base), rtol=1e-5, atol=1e-6), "fused qkv model differs"
    split = split_param_func()
    for i in range(2):
        q, k, v = split(w[f"llama.layers.{i}.self_attn.qkv_proj.weight"], split_nums=3, is_qkv=True,
                        num_heads=NH, num_key_value_heads=NKV)
        mine = ref.split_fused_qkv(w[f"llama.layers.{i}.self_attn.qkv_proj.weight"], NH, NKV)
        assert all(np.array_equal(x, y) for x, y in zip((q, k, v), mine))
    save_pretrained(m, d)
    te = convert_case(d, "fused_qkv_tp1", "the fp32_tp1 model with fuse_attention_qkv=True "
                      "(qkv_proj interleaved per KV group); pd2te must give fp32_tp1's TE tensors",
                      layout=(True, True))
    assert same(te["model_state.pdparams"], te_tp1["model_state.pdparams"])


def gen_unfused_ffn(base, base_state, te_tp1):
    """fuse_attention_ffn=False: gate_proj/up_proj split by PaddleNLP's split_param_func."""
    d = case_dir("unfused_ffn_tp1")
    split = split_param_func()
    w = collections.OrderedDict()
    for name, a in base_state.items():
        i, suffix = ref.split_layer_name(name)
        if suffix == "mlp.gate_up_fused_proj.weight":
            gate, up = split(a, split_nums=2)
            w[f"llama.layers.{i}.{ref.GATE}"] = gate
            w[f"llama.layers.{i}.{ref.UP}"] = up
        else:
            w[name] = a
    m = build(config(2, fuse_ffn=False), 0, w)
    assert np.allclose(logits(m), logits(base), rtol=1e-5, atol=1e-6), "unfused ffn model differs"
    save_pretrained(m, d)
    te = convert_case(d, "unfused_ffn_tp1", "the fp32_tp1 model with fuse_attention_ffn=False "
                      "(gate_proj, up_proj); pd2te must give fp32_tp1's TE tensors",
                      layout=(False, False))
    assert same(te["model_state.pdparams"], te_tp1["model_state.pdparams"])


def bf16_state(m):
    """The model cast to bfloat16; its state as paddle Tensors (saved as numpy u2)."""
    m.to(dtype="bfloat16")
    m.config.dtype = "bfloat16"   # what save_pretrained records for a bf16 model
    sd = collections.OrderedDict(m.state_dict())
    assert all(str(v.dtype) == "paddle.bfloat16" for v in sd.values())
    return sd


def stage_of(name, first_layer_of_stage):
    """Pipeline stage of a key: the embedding goes with the first stage, the final norm and
    lm_head with the last, layers by their GLOBAL index."""
    i, _ = ref.split_layer_name(name)
    if i is not None:
        return max(s for s, first in enumerate(first_layer_of_stage) if i >= first)
    return 0 if name.startswith("llama.embed_tokens.") else len(first_layer_of_stage) - 1


def check_u2(path):
    arrays = list(load(path).values())
    assert arrays and all(a.dtype.str == "<u2" for a in arrays), f"{path}: bf16 is not stored as u2"


def gen_pp():
    """PP=2 file pair of a 4-layer bf16 model, split by hand with global layer indices as
    PaddleNLP's pipeline state_dict() names them: stage 0 = embedding + layers 0-1,
    stage 1 = layers 2-3 + final norm + lm_head."""
    d = case_dir("bf16_pp2")
    m = build(config(4), 4)
    sd = bf16_state(m)
    stages = [collections.OrderedDict(), collections.OrderedDict()]
    for name, t in sd.items():
        stages[stage_of(name, [0, 2])][name] = t
    for s, st in enumerate(stages):
        path = os.path.join(d, f"model_state.tp00_pp{s:02d}.pdparams")
        save_state(st, path)
        check_u2(path)
    save_config(m.config, d)
    te = convert_case(d, "bf16_pp2", "4-layer bfloat16 model, pipeline stages tp00_pp00 "
                      "(embedding, layers 0-1) and tp00_pp01 (layers 2-3, norm, lm_head), "
                      "global layer indices")
    whole = ref.pd_to_te(collections.OrderedDict((k, v.numpy()) for k, v in sd.items()), NH, NKV)
    joined = collections.OrderedDict()
    for st in te.values():
        joined.update(st)
    assert same(joined, whole)


def gen_pp_layer100():
    """The last stage file of a 102-layer bf16 model run with PP=51 (2 layers per stage):
    model_state.tp00_pp50.pdparams holds layers 100 and 101 (global indices), the final norm
    and lm_head. Only that one file is kept (the converter handles files one by one)."""
    d = case_dir("bf16_pp51_last")
    layers = 102
    m = build(config(layers), 100)
    sd = bf16_state(m)
    firsts = list(range(0, layers, 2))
    last = collections.OrderedDict((k, v) for k, v in sd.items()
                                   if stage_of(k, firsts) == len(firsts) - 1)
    assert sorted({ref.split_layer_name(k)[0] for k in last} - {None}) == [100, 101]
    path = os.path.join(d, f"model_state.tp00_pp{len(firsts) - 1:02d}.pdparams")
    save_state(last, path)
    check_u2(path)
    save_config(m.config, d)
    convert_case(d, "bf16_pp51_last", "last pipeline stage (pp50 of 51) of a 102-layer bfloat16 "
                 "model: layers 100 and 101, norm, lm_head; layer indices with three digits")


def gen_size_sharded(base, te_tp1):
    """save_pretrained with a max_shard_size chosen so that layer 1's q_proj closes the first
    file and its k_proj/v_proj open the second."""
    d = case_dir("fp32_sharded")
    sd = base.state_dict()
    limit = 0
    for name, t in sd.items():
        limit += int(np.prod(t.shape)) * 4
        if name == "llama.layers.1.self_attn.q_proj.weight":
            break
    save_pretrained(base, d, max_shard_size=limit)
    with open(os.path.join(d, "model_state.pdparams.index.json"), encoding="utf-8") as f:
        index = json.load(f, object_pairs_hook=collections.OrderedDict)
    files = collections.OrderedDict((f, load(os.path.join(d, f))) for f in ref.model_files(d))
    assert list(files) == ["model_state-00001-of-00002.pdparams",
                           "model_state-00002-of-00002.pdparams"], list(files)
    wm = index["weight_map"]
    assert wm["llama.layers.1.self_attn.q_proj.weight"] != wm["llama.layers.1.self_attn.k_proj.weight"]
    te_files, te_index = ref.pd_to_te_files(files, NH, NKV, 1, index)
    joined = collections.OrderedDict()
    for st in te_files.values():
        joined.update(st)
    assert same(joined, te_tp1["model_state.pdparams"])
    merged = collections.OrderedDict()
    for st in files.values():
        merged.update(st)
    check_inverse(merged, joined, 1, False, True, "fp32_sharded")
    describe(d, "fp32_sharded", "the fp32_tp1 model size-sharded by save_pretrained into two "
             "files; layer 1's q_proj is in the first, its k_proj and v_proj in the second. The "
             "TE side puts each fused tensor in the file of q_proj (gate_proj for fc1)",
             1, (False, True), files, te_files, index, te_index)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.parse_args()
    paddle.set_device("cpu")
    os.makedirs(OUT, exist_ok=True)
    base = build(config(2), 0)
    base_state = numpy_state(base)
    te_tp1 = gen_fp32_tp1(base)
    gen_bf16_tp1(base_state)
    gen_fp32_tp2(base, te_tp1)
    gen_fused_qkv(base, base_state, te_tp1)
    gen_unfused_ffn(base, base_state, te_tp1)
    gen_pp()
    gen_pp_layer100()
    gen_size_sharded(base, te_tp1)
    print("versions:", versions())
    return 0


if __name__ == "__main__":
    sys.exit(main())
