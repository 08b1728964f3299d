# The released DeepSeek-V3 keeps e_score_correction_bias in float32 beside bfloat16 weights: the
# tensor check takes a float32 bias (the family's own_dtype), hf2mcore writes it as
# mlp.router.expert_bias in float32 (Megatron's TopKRouter keeps it so), and mcore2hf gives the
# same bytes back. The fixture's bfloat16 bias is widened exactly (bfloat16 is float32's top half).
set -e
rm -rf src && cp -r "$TESTDATA/hf/deepseek_v3_tiny" src
python3 "$CLI_DIR/../hf/edit_json.py" src/config.json num_experts_per_tok 4
python3 "$CLI_DIR/../hf/edit_json.py" src/config.json rms_norm_eps 1e-6
python3 - src/model.safetensors <<'PY'
import json, struct, sys
path = sys.argv[1]
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header, body = json.loads(data[8:8 + n]), data[8 + n:]
meta = header.pop("__metadata__", None)
out, parts, off = {}, [], 0
for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    raw = body[t["data_offsets"][0]:t["data_offsets"][1]]
    if name.endswith("e_score_correction_bias"):
        raw = b"".join(b"\0\0" + raw[i:i + 2] for i in range(0, len(raw), 2))
        t = dict(t, dtype="F32")
    out[name] = dict(t, data_offsets=[off, off + len(raw)])
    parts.append(raw)
    off += len(raw)
if meta is not None:
    out = {"__metadata__": meta, **out}
h = json.dumps(out, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(parts))
PY
ckptconv hf2mcore src mc --tp 2 --ep 2 -q
ckptconv inspect mc/iter_0000001/mp_rank_01_001/model_optim_rng.pt | grep -E "router"
ckptconv mcore2hf mc hf -q
ckptconv diff src hf | tail -2
