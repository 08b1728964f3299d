#!/usr/bin/env python3
"""The PaddleNLP way to do `ckptconv hf2paddle` and `ckptconv paddle2hf` on a LLaMA model, the
references of tests/bench/paddle_hf.sh. Run with a Python that has paddlepaddle, paddlenlp
and safetensors (PaddleNLP 3.0.0b4, paddle 3.0.0 and safetensors 0.8.0 here):

    paddle_hf_python.py hf2paddle HF_DIR OUT
    paddle_hf_python.py paddle2hf PADDLE_DIR OUT

hf2paddle is what PaddleNLP offers for a Hugging Face checkpoint: from_pretrained with
convert_from_torch=True (PaddleNLP's conversion_utils rename the tensors and transpose every
Linear weight to Paddle's [in, out], LlamaForCausalLM._get_name_mappings) in bfloat16, then
save_pretrained (model_state.pdparams through paddle.save, and config.json). from_pretrained
also writes its converted weights into HF_DIR as model_state.pdparams, a cache it loads instead
of converting on the next call: the script removes that file when it was not there before, so
that every run converts and the input stays as it was.

paddle2hf: PaddleNLP 3.0.0b4 has no export to the Hugging Face layout (conversion_utils only
read it), so this is the script its users write: paddle.load of model_state.pdparams, llama.*
renamed to model.*, every Linear weight (the 2-D tensors but the embedding) transposed back
to [out, in], safetensors.paddle.save_file, and config.json from PaddleNLP's config.json.
Single-card checkpoints with PaddleNLP's default separate q/k/v and gate/up projections.
"""

import json
import os
import sys
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import paddle

HF_CONFIG_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                    "num_key_value_heads", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta",
                    "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id")


def hf2paddle(src, dst):
    from paddlenlp.transformers import LlamaForCausalLM

    cache = os.path.join(src, "model_state.pdparams")
    cached = os.path.exists(cache)
    paddle.set_device("cpu")
    model = LlamaForCausalLM.from_pretrained(src, convert_from_torch=True, dtype="bfloat16")
    model.save_pretrained(dst)
    if not cached and os.path.exists(cache):
        os.remove(cache)


def paddle2hf(src, dst):
    from safetensors.paddle import save_file

    paddle.set_device("cpu")
    state = paddle.load(os.path.join(src, "model_state.pdparams"))
    state.pop("StructuredToParameterName@@", None)
    out = {}
    for k in list(state):
        t = state.pop(k)
        name = "model." + k[len("llama."):] if k.startswith("llama.") else k
        if t.ndim == 2 and not name.endswith("embed_tokens.weight"):
            t = paddle.transpose(t, [1, 0]).contiguous()
        out[name] = t
    os.makedirs(dst, exist_ok=True)
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        pcfg = json.load(f)
    cfg = {k: pcfg[k] for k in HF_CONFIG_FIELDS if k in pcfg}
    cfg.update(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
               torch_dtype=pcfg.get("dtype", "bfloat16"))
    cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    with open(os.path.join(dst, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("hf2paddle", "paddle2hf"):
        sys.exit(__doc__.split("\n\n")[1])
    (hf2paddle if sys.argv[1] == "hf2paddle" else paddle2hf)(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
