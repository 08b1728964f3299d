# Files written by torch 2.10 / numpy 2 (testdata/torch2): inspect reports exactly the tensors
# torch.load gives back (name, dtype, shape, stride, storage offset), and converting each to
# safetensors gives the same bytes, hashed tensor by tensor against the reference JSON.
for f in "$TESTDATA"/torch2/*.pt; do
  base=$(basename "$f" .pt)
  ckptconv inspect --json "$f" > "$base.json" || { echo "$base: inspect failed"; continue; }
  if [ "$base" = unsafe ]; then
    ckptconv convert -q "$f" "$base.safetensors" 2> refuse.txt && echo "$base: convert did not refuse"
    grep -q 'posix.system' refuse.txt || echo "$base: refusal does not name posix.system"
  else
    ckptconv convert -q "$f" "$base.safetensors" || echo "$base: convert failed"
  fi
  python3 - "$TESTDATA/torch2/expected/$base.json" "$base.json" "$base.safetensors" <<'PY'
import hashlib, json, os, struct, sys

exp = json.load(open(sys.argv[1]))
got = json.load(open(sys.argv[2]))
st_path = sys.argv[3]
name = exp["file"]
problems = []

want = {t["name"]: t for t in exp["tensors"]}
have = {t["name"]: t for t in got["tensors"]}
if sorted(want) != sorted(have):
    problems.append(f"tensor names differ: missing {sorted(set(want) - set(have))}, "
                    f"extra {sorted(set(have) - set(want))}")
for n in sorted(set(want) & set(have)):
    w, h = want[n], have[n]
    for ek, gk in (("dtype", "dtype"), ("shape", "shape"), ("stride", "stride"),
                   ("storage_offset", "offset")):
        if w[ek] != h[gk]:
            problems.append(f"{n}: {ek} {h[gk]!r}, expected {w[ek]!r}")

unknown = sorted(f'{g["module"]}.{g["name"]} at {g["path"]}' for g in got["globals"] if not g["known"])
want_unknown = sorted(f'{u["global"]} at {u["path"]}/(callable)' for u in exp.get("unsafe_globals", []))
if unknown != want_unknown:
    problems.append(f"unknown globals {unknown}, expected {want_unknown}")

ST_DTYPE = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
            "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "int64": "I64",
            "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "uint16": "U16",
            "uint32": "U32", "uint64": "U64", "bool": "BOOL"}
if "unsafe_globals" not in exp:
    with open(st_path, "rb") as fh:
        data = fh.read()
    (hlen,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + hlen])
    header.pop("__metadata__", None)
    body = data[8 + hlen:]
    if sorted(header) != sorted(want):
        problems.append(f"safetensors names differ: {sorted(header)}")
    for n in sorted(set(header) & set(want)):
        e, w = header[n], want[n]
        b, end = e["data_offsets"]
        if e["dtype"] != ST_DTYPE[w["dtype"]] or e["shape"] != w["shape"]:
            problems.append(f"{n}: safetensors {e['dtype']} {e['shape']}, expected {w['dtype']} {w['shape']}")
        if hashlib.sha256(body[b:end]).hexdigest() != w["sha256"]:
            problems.append(f"{n}: safetensors bytes differ from torch's")

for p in problems:
    print(f"{name}: {p}")
print(f"{name}: {len(want)} tensors checked" + (" (convert refused)" if "unsafe_globals" in exp else ""))
PY
done
