"""PaddleNLP's own logits for the PaddleNLP LLaMA fixtures: testdata/llama/fp32_tp1/logits.json
and testdata/llama/bf16_tp1/logits.json, the reference for `ckptconv verify`.

Needs the paddlepaddle 2.6 + paddlenlp 2.8 environment of README_paddlenlp.md:
    python testdata/gen/gen_paddlenlp_logits.py

Each case is loaded with PaddleNLP's LlamaForCausalLM.from_pretrained(<case dir>) on the CPU,
with dtype float32, and run in eval mode on LOGITS_INPUT_IDS with no attention mask and default
position ids. The checkpoint files are only read. Before the forward the script checks that
the model holds exactly the file's tensors: the same names, nothing missing, nothing extra, and
the same values bit for bit. For bf16 that means bfloat16 widened to float32, which is exact.
During the forward it counts calls to PaddleNLP's fused and flash code paths, and fails if
any of them ran. The JSON layout is that of testdata/hf/llama_tiny/logits.json.

paddle 2.6 has no CPU bfloat16 kernels for gaussian (model init) or matmul. So bf16_tp1 is
loaded with dtype="float32": PaddleNLP casts the bf16 weights to float32 while loading, and the
forward runs in float32. The producer string says so.
"""

import json
import os
import pickle
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
os.environ.setdefault("PADDLE_SDK_DISABLE_TELEMETRY", "1")
import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
import paddlenlp  # noqa: E402
from paddlenlp.transformers import LlamaForCausalLM  # noqa: E402
from paddlenlp.transformers.llama import modeling  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA = os.path.join(os.path.dirname(HERE), "llama")
LOGITS_INPUT_IDS = [1, 17, 42, 99, 100, 3, 127, 64]   # vocab 128
CASES = ("fp32_tp1", "bf16_tp1")


def load_file_arrays(path):
    """The .pdparams as plain pickle: name -> numpy array (bf16 as uint16 bit patterns)."""
    with open(path, "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    return {k: v for k, v in raw.items() if isinstance(v, np.ndarray)}


def as_float32(a):
    if a.dtype == np.uint16:                      # paddle stores bfloat16 as uint16
        return (a.astype(np.uint32) << 16).view(np.float32)
    assert a.dtype == np.float32, a.dtype
    return a


class Counter:
    """Wraps a module-level function of paddlenlp's llama modeling and counts its calls."""

    def __init__(self, owner, name):
        self.owner, self.name, self.calls = owner, name, 0
        self.orig = getattr(owner, name, None)
        if self.orig is not None:
            setattr(owner, name, self)

    def __call__(self, *a, **kw):
        self.calls += 1
        return self.orig(*a, **kw)

    def restore(self):
        if self.orig is not None:
            setattr(self.owner, self.name, self.orig)


def forward_logits(model):
    """Forward of LOGITS_INPUT_IDS, counting calls to the code paths that matter."""
    watched = {
        "flash_attention": Counter(modeling, "flash_attention"),
        "fused_rotary_position_embedding": Counter(modeling, "fused_rotary_position_embedding"),
        "rms_norm_fused": Counter(modeling, "rms_norm_fused"),
        "F.scaled_dot_product_attention": Counter(F, "scaled_dot_product_attention"),
        "scaled_dot_product_attention": Counter(modeling, "scaled_dot_product_attention"),
        "apply_rotary_pos_emb": Counter(modeling, "apply_rotary_pos_emb"),
        "swiglu": Counter(modeling, "swiglu"),
    }
    try:
        ids = paddle.to_tensor([LOGITS_INPUT_IDS], dtype="int64")
        with paddle.no_grad():
            out = model(input_ids=ids)
        logits = out[0] if isinstance(out, (tuple, list)) else out
        if not isinstance(logits, paddle.Tensor):
            logits = out.logits
    finally:
        for c in watched.values():
            c.restore()
    calls = {k: c.calls for k, c in watched.items()}
    assert str(logits.dtype) == "paddle.float32", logits.dtype
    return logits.numpy()[0], calls


def paths_used(model, calls):
    """What the forward ran, in words (a summary and the details); fails on any non-default
    (fused or flash) path."""
    cfg = model.config
    n = cfg.num_hidden_layers
    for k in ("flash_attention", "fused_rotary_position_embedding", "rms_norm_fused",
              "F.scaled_dot_product_attention"):
        assert calls[k] == 0, f"{k} was called {calls[k]} times"
    assert calls["scaled_dot_product_attention"] == n and calls["apply_rotary_pos_emb"] == n, calls
    assert not cfg.use_flash_attention and not cfg.use_fused_rope and not cfg.use_fused_rms_norm
    assert not any(layer.self_attn.use_fused_rope for layer in model.llama.layers)
    assert cfg.rope and not cfg.alibi and cfg.rope_scaling_type is None
    assert not cfg.use_long_sequence_strategies and not cfg.sequence_parallel
    assert cfg.tensor_parallel_degree in (-1, 1), cfg.tensor_parallel_degree
    rotary = {type(layer.self_attn.rotary_emb).__name__ for layer in model.llama.layers}
    assert rotary == {"LlamaRotaryEmbedding"}, rotary
    swiglu = getattr(modeling.swiglu, "__module__", "?") + "." + modeling.swiglu.__name__
    summary = (f"rope_theta {cfg.rope_theta}, rms_norm_eps {cfg.rms_norm_eps}; no fused or flash "
               f"path: use_flash_attention={cfg.use_flash_attention}, use_fused_rope="
               f"{cfg.use_fused_rope}, use_fused_rms_norm={cfg.use_fused_rms_norm}, and 0 calls to "
               f"flash_attention, fused_rotary_position_embedding, rms_norm_fused and "
               f"F.scaled_dot_product_attention during the forward")
    detail = (f"what ran per layer: RMSNorm in float32 (x * rsqrt(mean(x^2) + eps) * w); "
              f"{rotary.pop()} + apply_rotary_pos_emb (rotate_half, cos/sin cache in float32); "
              f"modeling.scaled_dot_product_attention (matmul(q / sqrt(head_dim), k^T) + the "
              f"additive causal mask PaddleNLP builds for attention_mask=None, float32 softmax, "
              f"GQA by repeat_kv); fuse_attention_qkv={cfg.fuse_attention_qkv}, separate q/k/v "
              f"projections; fuse_attention_ffn={cfg.fuse_attention_ffn}, swiglu = {swiglu} "
              f"(silu(gate) * up, gate = first half of gate_up_fused_proj's output); "
              f"calls counted: {json.dumps(calls, sort_keys=True)}")
    return summary, detail


def write_logits(path, producer, note, logits):
    """The layout of testdata/hf/llama_tiny/logits.json."""
    with open(path, "w") as f:
        json.dump({
            "producer": producer,
            "input_ids": LOGITS_INPUT_IDS,
            "shape": list(logits.shape),
            "note": note,
            "logits": [[float(x) for x in row] for row in logits.tolist()],
        }, f, indent=0)
        f.write("\n")


def run_case(case):
    d = os.path.join(LLAMA, case)
    file_arrays = load_file_arrays(os.path.join(d, "model_state.pdparams"))
    file_dtypes = {a.dtype for a in file_arrays.values()}
    # dtype float32: paddle 2.6 cannot build (or run) the model in bfloat16 on the CPU
    model = LlamaForCausalLM.from_pretrained(d, dtype="float32")
    model.eval()

    # the model holds exactly the file's tensors: no key missing, none extra, bit for bit
    sd = model.state_dict()
    assert set(sd) == set(file_arrays), sorted(set(sd) ^ set(file_arrays))
    assert {k for k, _ in model.named_parameters()} <= set(file_arrays)
    for k, a in file_arrays.items():
        got = sd[k].numpy()
        assert got.dtype == np.float32 and got.shape == a.shape, (k, got.dtype, got.shape)
        assert got.tobytes() == as_float32(a).tobytes(), f"{case}: {k} differs from the file"

    logits, calls = forward_logits(model)
    cfg = model.config
    assert list(logits.shape) == [len(LOGITS_INPUT_IDS), cfg.vocab_size]
    assert np.all(np.isfinite(logits))
    version = (f"PaddleNLP {paddlenlp.__version__.replace('.post', '')} (paddlenlp.__version__ "
               f"{paddlenlp.__version__}), paddlepaddle {paddle.__version__} CPU")
    if file_dtypes == {np.dtype(np.float32)}:
        loaded = (f"LlamaForCausalLM.from_pretrained('testdata/llama/{case}', dtype='float32') "
                  f"(model_state.pdparams, float32; every tensor loaded, equal to the file bit for "
                  f"bit)")
    else:
        assert file_dtypes == {np.dtype(np.uint16)}, file_dtypes
        loaded = (f"LlamaForCausalLM.from_pretrained('testdata/llama/{case}', dtype='float32') "
                  f"(model_state.pdparams holds bfloat16; PaddleNLP cast every weight to float32 "
                  f"while loading, exactly: bf16 -> fp32 widening, checked against the file; the "
                  f"forward ran in float32, since paddle {paddle.__version__} has no CPU bfloat16 "
                  f"matmul or gaussian kernel)")
    summary, detail = paths_used(model, calls)
    producer = (f"{version}: {loaded}.forward(input_ids), eval, float32, CPU, no attention_mask "
                f"(causal), position_ids default 0..{len(LOGITS_INPUT_IDS) - 1}; {summary}")
    note = ("logits[i][v] for token position i, vocabulary id v; float32 values written with "
            f"Python repr. Forward details: {detail}")
    out = os.path.join(d, "logits.json")
    write_logits(out, producer, note, logits)
    print(f"gen_paddlenlp_logits: {case}: {logits.shape}, calls {calls}")
    return logits


def main():
    paddle.set_device("cpu")
    paddle.seed(0)
    results = {c: run_case(c) for c in CASES}
    # the bf16 model is the fp32 one rounded: its logits are close to, not equal to, fp32's
    diff = float(np.abs(results["fp32_tp1"] - results["bf16_tp1"]).max())
    print(f"gen_paddlenlp_logits: max |fp32 - bf16| logits difference {diff:.3g}")
    assert 0 < diff < 0.05, diff
    return 0


if __name__ == "__main__":
    sys.exit(main())
