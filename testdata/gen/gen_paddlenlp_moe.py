"""Writes testdata/gen/paddlenlp_moe_oracle.json: what PaddleNLP 3 itself makes of the tiny
Hugging Face Mixtral (testdata/hf/mixtral_tiny), without a fixture directory: PaddleNLP's
MixtralForCausalLM loads the HF directory through its own conversion
(from_pretrained(convert_from_torch=True): _get_name_mappings, its transposes included) in
bfloat16, is saved with save_pretrained(safe_serialization=False) at TP 1 (model_state.pdparams),
and the saved file's tensors are recorded by structured name: dtype, shape and the sha256 of
their bytes as paddle.save writes them (bf16 as uint16). The oracle also holds the logits of
PaddleNLP's own forward on the ids of mixtral_tiny's logits.json, in float32, and how far they
are from transformers' (that file's logits). "tp2" holds each rank's tensors at tensor
parallel 2 as PaddleNLP's own split actions cut the saved ones
(get_tensor_parallel_convert_actions of _get_tensor_parallel_mappings, what its from_pretrained
does when it loads a single-card checkpoint on two ranks), hashed the same way.

The CLI tests (tests/cli/paddle/moe_*.sh) compare ckptconv hf2paddle's output with these
hashes, so a test needs no PaddleNLP.

Needs paddlepaddle 3.0.0 and paddlenlp 3.0.0b4 (README_paddlenlp3.md has the versions) and
torch where PaddleNLP's convert_from_torch reads the safetensors:
    python testdata/gen/gen_paddlenlp_moe.py
"""

import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import warnings

import numpy as np

warnings.simplefilter("ignore")
os.environ.setdefault("PADDLE_SDK_DISABLE_TELEMETRY", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
OUT = os.path.join(HERE, "paddlenlp_moe_oracle.json")
# the sha256's first 64 bits: enough to tell tensors apart, a third of the file
SHA_CHARS = 16
CASES = {"mixtral": ("mixtral_tiny", "MixtralForCausalLM")}


def saved_tensors(path):
    """model_state.pdparams as paddle.save wrote it: name -> numpy array (bf16 as uint16)."""
    with open(path, "rb") as f:
        state = pickle.load(f)
    return {k: v for k, v in state.items() if k != "StructuredToParameterName@@"}


def digest(a):
    a = np.ascontiguousarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "sha256": hashlib.sha256(a.tobytes()).hexdigest()[:SHA_CHARS]}


def tp_ranks(cls, saved_dir, state, tp):
    """state cut for each of tp ranks by PaddleNLP's own split actions."""
    config = cls.config_class.from_pretrained(saved_dir)
    ranks = []
    for rank in range(tp):
        config.tensor_parallel_degree = tp
        config.tensor_parallel_rank = rank
        actions = cls.get_tensor_parallel_convert_actions(config, list(state))
        ranks.append({k: digest(actions[k](v) if k in actions else v) for k, v in state.items()})
    return ranks


def forward(model, ids):
    import paddle

    model.eval()
    with paddle.no_grad():
        out = model(paddle.to_tensor([ids], dtype="int64"))
    out = out[0] if isinstance(out, (tuple, list)) else out.logits
    return out.astype("float32").numpy()[0]


def one_case(name, fixture, cls_name):
    import paddle
    import paddlenlp.transformers as pt

    src = os.path.join(TESTDATA, "hf", fixture)
    cls = getattr(pt, cls_name)
    work = tempfile.mkdtemp()
    try:
        hf = os.path.join(work, "hf")
        shutil.copytree(src, hf)
        model = cls.from_pretrained(hf, convert_from_torch=True, dtype="bfloat16")
        saved = os.path.join(work, "pd")
        model.save_pretrained(saved, safe_serialization=False)
        files = sorted(os.listdir(saved))
        state = saved_tensors(os.path.join(saved, "model_state.pdparams"))
        tensors = {k: digest(v) for k, v in state.items()}
        tp2 = tp_ranks(cls, saved, state, 2)
        config = json.load(open(os.path.join(saved, "config.json")))
        ref = json.load(open(os.path.join(src, "logits.json")))
        paddle.set_default_dtype("float32")
        model32 = cls.from_pretrained(hf, convert_from_torch=True, dtype="float32")
        got = forward(model32, ref["input_ids"])
        diff = float(np.abs(got - np.array(ref["logits"], dtype="float32")).max())
    finally:
        shutil.rmtree(work)
    return {"fixture": "testdata/hf/" + fixture, "class": cls_name, "files": files,
            "config": {k: config[k] for k in sorted(config) if k in (
                "architectures", "model_type", "num_local_experts", "num_experts_per_tok", "intermediate_size",
                "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
                "sliding_window", "tie_word_embeddings", "dtype")},
            "tensors": tensors, "tp2": tp2, "input_ids": ref["input_ids"],
            "logits_first_row": [round(float(x), 6) for x in got[0][:8]],
            "max_abs_diff_vs_transformers": diff}


def main():
    import paddle
    import paddlenlp

    out = {"paddlepaddle": paddle.__version__, "paddlenlp": paddlenlp.__version__,
           "numpy": np.__version__, "python": sys.version.split()[0], "cases": {}}
    for name, (fixture, cls) in CASES.items():
        out["cases"][name] = one_case(name, fixture, cls)
        print(name, "max |paddlenlp - transformers| =", out["cases"][name]["max_abs_diff_vs_transformers"])
    with open(OUT, "w") as f:
        json.dump(out, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
