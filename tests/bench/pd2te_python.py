"""The Python way to do `ckptconv pd2te IN_DIR OUT_DIR`, for comparison: what PaddleNLP's
TransformerEngine converter (llm/llama/te_llama_ckpt_converter.py, mode pd2te) does today,
rewritten here from its documented behaviour.

Run with the venv Python (paddlepaddle): pd2te_python.py IN_DIR OUT_DIR

- every `model_state*.pdparams` of IN_DIR is paddle.load-ed (all of them first, to check that
  they hold PaddleNLP names and no TE names), then each is converted on its own and written
  with paddle.save under the same file name in OUT_DIR, which must be empty;
- names after `llama.layers.{i}.` are renamed to TE's; every other name passes through;
- 2-D tensors under `llama.layers` are transposed; q/k/v of each layer are concatenated on
  axis 1, transposed, and become `layernorm_qkv.weight`, appended after the other tensors;
- nothing else is written (no config or tokenizer files, no optimizer state).

With Paddle 3.3 a transpose is a strided view, and paddle.save writes such a tensor as a
Fortran-order ndarray: the transposed weights reach the output file as the input's bytes,
never rearranged in memory. Only the q/k/v concatenation copies data.

Layer indices are parsed as whole numbers here rather than as at most two digits; the inputs
this benchmark uses have far fewer than 100 layers, where the two agree. The size-split
index json rename is left out: the benchmark input is one unsplit file.
"""

import collections
import os
import sys

import paddle

PREFIX = "llama.layers."
NAME_MAP = {
    "self_attn.o_proj.weight": "transformer.self_attention.proj.weight",
    "input_layernorm.weight": "transformer.self_attention.layernorm_qkv.ln_weight",
    "post_attention_layernorm.weight": "transformer.layernorm_mlp.ln_weight",
    "mlp.gate_up_fused_proj.weight": "transformer.layernorm_mlp.fc1_weight",
    "mlp.down_proj.weight": "transformer.layernorm_mlp.fc2_weight",
}
QKV = "transformer.self_attention.layernorm_qkv.weight"


def te_name(name):
    layer, rest = name[len(PREFIX):].split(".", 1)
    return f"{PREFIX}{layer}.{NAME_MAP[rest]}"


def check_pd(path, state):
    te = any("transformer" in k for k in state)
    pd = any("self_attn" in k for k in state)
    if te == pd:
        raise ValueError(f"{path}: the input checkpoint is not a valid checkpoint")
    if not pd:
        raise ValueError(f"{path}: pd2te needs a PaddleNLP checkpoint, this one has TE names")


def convert(state):
    out = collections.OrderedDict()
    for name, param in state.items():
        if any(s in name for s in ("q_proj", "k_proj", "v_proj", "layernorm_qkv.weight")):
            continue
        if isinstance(param, paddle.Tensor) and param.ndim == 2 and "llama.layers" in name:
            param = param.transpose([1, 0])
        out[te_name(name) if name.startswith(PREFIX) else name] = param
    layers = {int(k.split(".")[2]) for k in state if k.startswith(PREFIX)}
    for i in layers:
        p = f"{PREFIX}{i}.self_attn."
        qkv = [state[p + f"{x}_proj.weight"] for x in "qkv"]
        out[f"{PREFIX}{i}.{QKV}"] = paddle.concat(qkv, axis=1).transpose([1, 0])
    return out


def main(src, dst):
    paddle.set_device("cpu")
    os.makedirs(dst, exist_ok=True)
    if os.listdir(dst):
        sys.exit(f"pd2te_python: output directory {dst} is not empty")
    files = sorted(f for f in os.listdir(src) if f.startswith("model_state") and f.endswith(".pdparams"))
    if not files:
        sys.exit(f"pd2te_python: no model_state*.pdparams in {src}")
    states = {}
    for f in files:
        states[f] = paddle.load(os.path.join(src, f))
        check_pd(f, states[f])
    for f in files:
        paddle.save(convert(states[f]), os.path.join(dst, f))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
