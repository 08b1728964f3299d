"""`ckptconv pd2te` / `te2pd` against the numpy reference and real paddle. Run with the
venv Python (paddle, numpy); CKPTCONV names the binary, TESTDATA the testdata directory.

For every PaddleNLP fixture in testdata/llama/:
  - pd2te: each output file holds exactly the tensors that llama_te_reference.py computes
    from the input here, bit for bit (and the committed expected_te.json agrees), in the
    input's order with each fused tensor where its first source was; real paddle.load
    loads it to the same bits; the index json is the reference's, formatted as
    json.dump(indent=4); config/tokenizer files are copied; .pdopt is not.
  - te2pd of that output gives the input back byte for byte per tensor (the fused_qkv and
    unfused_ffn fixtures with --fused-qkv / --unfused-ffn).
A 128-layer checkpoint is written here with paddle.save and goes through both. Then every
error path: te2pd on GQA without head counts, a non-empty output directory, pd2te on a TE
checkpoint, a missing k_proj, an unknown layer tensor, and --dry-run writes nothing.
"""

import collections
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_te_reference as ref  # noqa: E402

warnings.simplefilter("ignore")
import paddle  # noqa: E402

CKPTCONV = os.environ["CKPTCONV"]
TESTDATA = os.environ["TESTDATA"]
LLAMA = os.path.join(TESTDATA, "llama")
RESULTS = {"ok": 0, "fail": 0}


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def case(name, fn, *args):
    try:
        fn(*args)
    except (Fail, ref.ConversionError, AssertionError, KeyError, subprocess.SubprocessError) as e:
        RESULTS["fail"] += 1
        print(f"FAIL {name}\n     | {e}")
    else:
        RESULTS["ok"] += 1
        print(f"ok   {name}")


def run(*args, expect=0):
    p = subprocess.run([CKPTCONV, *args], capture_output=True, text=True)
    if p.returncode != expect:
        raise Fail(f"ckptconv {' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stderr}")
    return p


def raw_load(path):
    """name -> array, in file order, by plain pickle (no paddle post-processing)."""
    return ref.load_pdparams(path)


def digest(a):
    a = np.ascontiguousarray(a)
    return (a.dtype.str, list(a.shape), hashlib.sha256(a.tobytes()).hexdigest())


def same_tensors(got, want, where):
    check(list(got) == list(want) or sorted(got) == sorted(want),
          f"{where}: names differ: extra {sorted(set(got) - set(want))}, missing {sorted(set(want) - set(got))}")
    for k in want:
        check(digest(got[k]) == digest(want[k]), f"{where}: {k}: {digest(got[k])} != {digest(want[k])}")


def expected_order(input_names, out_names):
    """Our order: the input's, each converted name where its first source stood."""
    seen = collections.OrderedDict()
    for n in input_names:
        seen.setdefault(ref.convert_name(n, "pd2te"), None)
    order = [n for n in seen if n in out_names]
    check(set(order) == set(out_names), f"names without a source: {sorted(set(out_names) - set(order))}")
    return order


def paddle_bits(path):
    out = {}
    for k, t in paddle.load(path).items():
        if isinstance(t, paddle.Tensor):
            a = t.numpy()
            if str(t.dtype).endswith("bfloat16"):
                a = a.view(np.uint16) if a.dtype != np.uint16 else a
            out[k] = a
    return out


def heads_of(case_dir):
    cfg = json.load(open(os.path.join(case_dir, "config.json")))
    return cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg.get("tensor_parallel_degree", 1) or 1


def reference_te(case_dir):
    """({file: te state}, te index or None), computed here from the input files."""
    nh, nkv, _ = heads_of(case_dir)
    files = ref.model_files(case_dir)
    index_path = os.path.join(case_dir, "model_state.pdparams.index.json")
    if os.path.exists(index_path):
        index = json.load(open(index_path), object_pairs_hook=collections.OrderedDict)
        states = collections.OrderedDict((f, raw_load(os.path.join(case_dir, f))) for f in files)
        return ref.pd_to_te_files(states, nh, nkv, 1, index)
    out = {}
    for f in files:
        st = raw_load(os.path.join(case_dir, f))
        tp = 2 if ".tp0" in f and os.path.exists(os.path.join(case_dir, "model_state.tp01.pdparams")) else 1
        out[f] = ref.pd_to_te(st, nh, nkv, tp)
    return out, None


def check_pd2te(case_dir, out):
    want, want_index = reference_te(case_dir)
    committed = json.load(open(os.path.join(case_dir, "expected_te.json")))["te"]
    inputs = {f: list(raw_load(os.path.join(case_dir, f))) for f in ref.model_files(case_dir)}
    all_inputs = [n for f in sorted(inputs) for n in inputs[f]]
    for f, state in want.items():
        got = raw_load(os.path.join(out, f))
        same_tensors(got, state, f"{out}/{f}")
        check(sorted(map(json.dumps, ref.records(state))) == sorted(map(json.dumps, committed[f])),
              f"{f}: the reference computed here disagrees with the committed expected_te.json")
        order = expected_order(all_inputs if want_index else inputs[f], list(state))
        check(list(got) == order, f"{f}: order {list(got)} != {order}")
        same_tensors(paddle_bits(os.path.join(out, f)), state, f"paddle.load({out}/{f})")
    if want_index is not None:
        text = open(os.path.join(out, "model_state.pdparams.index.json")).read()
        check(text == json.dumps(want_index, indent=4),
              f"index differs from the reference:\n{text[:400]}\n---\n{json.dumps(want_index, indent=4)[:400]}")
    for f in os.listdir(case_dir):
        src = os.path.join(case_dir, f)
        if f.endswith(".pdopt"):
            check(not os.path.exists(os.path.join(out, f)), f"{f} was copied")
        elif not f.startswith("model_state"):
            check(open(src, "rb").read() == open(os.path.join(out, f), "rb").read(), f"{f} not copied as it is")


def check_roundtrip(case_dir, out, back, *flags):
    run("te2pd", "-q", out, back, *flags)
    src = collections.OrderedDict()
    got = collections.OrderedDict()
    for f in ref.model_files(case_dir):
        src.update(raw_load(os.path.join(case_dir, f)))
        got.update(raw_load(os.path.join(back, f)))
    same_tensors(got, src, f"te2pd {' '.join(flags)} of pd2te of {case_dir}")
    for f in os.listdir(back):
        if f.startswith("model_state") and f.endswith(".json"):
            index = json.load(open(os.path.join(back, f)), object_pairs_hook=collections.OrderedDict)
            where = {n: m for m in ref.model_files(back) for n in raw_load(os.path.join(back, m))}
            check(dict(index["weight_map"]) == where, f"te2pd wrote {f} that disagrees with its files")
            check(list(index)[0] == "weight_map", f"{f}: weight_map is not first")


def pd2te_case(name):
    case_dir = os.path.join(LLAMA, name)
    out = os.path.join(WORK, f"{name}-te")
    run("pd2te", "-q", case_dir, out)
    check_pd2te(case_dir, out)
    flags = {"fused_qkv_tp1": ["--fused-qkv"], "unfused_ffn_tp1": ["--unfused-ffn"]}.get(name, [])
    check_roundtrip(case_dir, out, os.path.join(WORK, f"{name}-back"), *flags)


def write_model(path, layers, dtype="bfloat16", hidden=16, heads=4, kv_heads=2, inter=32, vocab=32, drop=(), add=()):
    """A PaddleNLP-named LLaMA state dict saved by the real paddle.save."""
    rng = np.random.default_rng(layers)
    d = hidden // heads
    shapes = [("llama.embed_tokens.weight", [vocab, hidden])]
    for i in range(layers):
        p = f"llama.layers.{i}."
        shapes += [(p + "self_attn.q_proj.weight", [hidden, hidden]),
                   (p + "self_attn.k_proj.weight", [hidden, kv_heads * d]),
                   (p + "self_attn.v_proj.weight", [hidden, kv_heads * d]),
                   (p + "self_attn.o_proj.weight", [hidden, hidden]),
                   (p + "mlp.gate_up_fused_proj.weight", [hidden, 2 * inter]),
                   (p + "mlp.down_proj.weight", [inter, hidden]),
                   (p + "input_layernorm.weight", [hidden]),
                   (p + "post_attention_layernorm.weight", [hidden])]
    shapes += [("llama.norm.weight", [hidden]), ("lm_head.weight", [hidden, vocab])] + list(add)
    state = collections.OrderedDict()
    for n, s in shapes:
        if n not in drop:
            state[n] = paddle.to_tensor(rng.standard_normal(s).astype(np.float32)).astype(dtype)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    paddle.save(state, path)
    with open(os.path.join(os.path.dirname(path), "config.json"), "w") as f:
        json.dump({"hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
                   "intermediate_size": inter, "num_hidden_layers": layers}, f)


def many_layers():
    src = os.path.join(WORK, "l128")
    write_model(os.path.join(src, "model_state.pdparams"), 128)
    out = os.path.join(WORK, "l128-te")
    run("pd2te", "-q", src, out)
    want = ref.pd_to_te(raw_load(os.path.join(src, "model_state.pdparams")), 4, 2)
    got = raw_load(os.path.join(out, "model_state.pdparams"))
    same_tensors(got, want, "128 layers")
    check("llama.layers.127.transformer.self_attention.layernorm_qkv.weight" in got, "layer 127 missing")
    same_tensors(paddle_bits(os.path.join(out, "model_state.pdparams")), want, "paddle.load, 128 layers")
    check_roundtrip(src, out, os.path.join(WORK, "l128-back"))


def expect_error(out, needles, *args):
    p = run(*args, expect=1)
    for n in needles:
        check(n in p.stderr, f"stderr does not mention {n!r}:\n{p.stderr}")
    left = os.listdir(out) if os.path.exists(out) else []
    check(not left, f"a failed run left {left} in {out}")
    parent = os.path.dirname(out)
    check(not [f for f in os.listdir(parent) if ".ckptconv-" in f], f"staging directory left in {parent}")


def error_gqa_without_heads():
    te = os.path.join(WORK, "gqa-te")
    run("pd2te", "-q", os.path.join(LLAMA, "bf16_tp1"), te)
    os.remove(os.path.join(te, "config.json"))
    out = os.path.join(WORK, "err", "gqa")
    expect_error(out, ["num_attention_heads", "--num-attention-heads", "--num-key-value-heads"], "te2pd", te, out)
    run("te2pd", "-q", te, out, "--num_attention_heads", "4", "--num_key_value_heads", "2")
    same_tensors(raw_load(os.path.join(out, "model_state.pdparams")),
                 raw_load(os.path.join(LLAMA, "bf16_tp1", "model_state.pdparams")), "te2pd with head flags")


def error_not_empty():
    out = os.path.join(WORK, "full")
    os.makedirs(out)
    with open(os.path.join(out, "keep.txt"), "w") as f:
        f.write("mine")
    p = run("pd2te", os.path.join(LLAMA, "fp32_tp1"), out, expect=2)
    check("not empty" in p.stderr and "--force" in p.stderr, p.stderr)
    check(os.listdir(out) == ["keep.txt"], f"refused run touched {out}")
    run("pd2te", "-q", "--force", os.path.join(LLAMA, "fp32_tp1"), out)
    check(open(os.path.join(out, "keep.txt")).read() == "mine", "--force removed a file it does not write")
    check_pd2te(os.path.join(LLAMA, "fp32_tp1"), out)


def error_wrong_direction():
    te = os.path.join(WORK, "dir-te")
    run("pd2te", "-q", os.path.join(LLAMA, "fp32_tp1"), te)
    expect_error(os.path.join(WORK, "err", "dir"), ["te2pd"], "pd2te", te, os.path.join(WORK, "err", "dir"))
    expect_error(os.path.join(WORK, "err", "dir2"), ["pd2te"], "te2pd", os.path.join(LLAMA, "fp32_tp1"),
                 os.path.join(WORK, "err", "dir2"))


def error_missing_k():
    src = os.path.join(WORK, "nok")
    write_model(os.path.join(src, "model_state.pdparams"), 2, drop=("llama.layers.1.self_attn.k_proj.weight",))
    expect_error(os.path.join(WORK, "err", "nok"), ["llama.layers.1.self_attn.k_proj.weight"],
                 "pd2te", src, os.path.join(WORK, "err", "nok"))


def error_unknown_key():
    src = os.path.join(WORK, "unknown")
    write_model(os.path.join(src, "model_state.pdparams"), 2,
                add=[("llama.layers.0.self_attn.rotary_emb.inv_freq", [8])])
    expect_error(os.path.join(WORK, "err", "unknown"), ["llama.layers.0.self_attn.rotary_emb.inv_freq", "no rule"],
                 "pd2te", src, os.path.join(WORK, "err", "unknown"))


def dry_run():
    out = os.path.join(WORK, "dry")
    p = run("pd2te", "--dry-run", os.path.join(LLAMA, "fp32_sharded"), out)
    check(not os.path.exists(out), "--dry-run created the output directory")
    check(not [f for f in os.listdir(WORK) if ".ckptconv-" in f], "--dry-run left a staging directory")
    want, _ = reference_te(os.path.join(LLAMA, "fp32_sharded"))
    for f, state in want.items():
        for n in state:
            check(f"  {n} " in p.stdout, f"--dry-run does not list {n}")
    check("transpose(concat[axis=1](llama.layers.1.self_attn.q_proj.weight" in p.stdout, p.stdout[:2000])
    doc = json.loads(run("pd2te", "--dry-run", "--json", os.path.join(LLAMA, "fp32_sharded"), out).stdout)
    check(doc["tensors"] == sum(len(s) for s in want.values()), "--json counts")
    check(not os.path.exists(out), "--dry-run --json created the output directory")


def original_flags():
    out = os.path.join(WORK, "orig-flags")
    run("pd2te", "--input_ckpt_path", os.path.join(LLAMA, "bf16_pp2"), "--output_ckpt_path", out,
        "--mode", "pd2te", "-q")
    check_pd2te(os.path.join(LLAMA, "bf16_pp2"), out)


if __name__ == "__main__":
    WORK = tempfile.mkdtemp(prefix="ckpt-pd2te.")
    os.makedirs(os.path.join(WORK, "err"))
    try:
        for name in sorted(os.listdir(LLAMA)):
            if os.path.isdir(os.path.join(LLAMA, name)):
                case(f"pd2te + te2pd {name}", pd2te_case, name)
        case("128 layers, paddle.save", many_layers)
        case("error: te2pd on GQA without head counts", error_gqa_without_heads)
        case("error: non-empty output without --force", error_not_empty)
        case("error: wrong direction", error_wrong_direction)
        case("error: missing k_proj", error_missing_k)
        case("error: unknown layer tensor", error_unknown_key)
        case("--dry-run writes nothing", dry_run)
        case("original flags", original_flags)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"{RESULTS['ok']} passed, {RESULTS['fail']} failed")
    sys.exit(1 if RESULTS["fail"] else 0)
