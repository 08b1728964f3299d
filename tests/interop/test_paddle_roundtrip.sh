#!/usr/bin/env bash
# paddle.save fixtures -> ckptconv convert -> .pdparams/.pdopt (pickle protocol 2 and 4),
# loaded by the real paddle.load: equal to paddle.load of the input, and the unpickled files
# equal too (keys and their order, the StructuredToParameterName@@ table, optimizer
# (var_name, array) tuples, master_weights, LR_Scheduler). The ~1 GiB split fixture is
# decompressed into the temp dir and must come back whole, matching its reference.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "paddle"
need_program zstd

# convert_one SRC PROTOCOL
convert_one() {
    local src="$1" protocol="$2" name dir
    name=$(basename "$src")
    dir="$WORK/rt-$name-p$protocol"
    mkdir -p "$dir"
    ckpt convert -q --protocol "$protocol" "$src" "$dir/$name"
    queue pd "$name protocol $protocol: paddle.load and unpickled content equal the input" \
        roundtrip "$src" "$dir/$name" "$TESTDATA/paddle/expected/${name%.*}.json" "$protocol"
}

split_big() {
    local raw="$WORK/split_big.pdparams" out="$WORK/split_out/split_big.pdparams"
    mkdir -p "$WORK/split_out"
    zstd -q -d --long=31 "$TESTDATA/paddle/split_big.pdparams.zst" -o "$raw"
    "$VENV_PYTHON" - "$raw" "$TESTDATA/paddle/expected/split_big.json" <<'PY'
import hashlib, json, sys
exp = json.load(open(sys.argv[2]))
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 24), b""):
        h.update(block)
if h.hexdigest() != exp["uncompressed_sha256"]:
    sys.exit("split_big.pdparams.zst does not decompress to the file the generator wrote")
PY
    ckpt inspect --json "$raw" | "$VENV_PYTHON" -c '
import json, sys
t = {x["name"]: x for x in json.load(sys.stdin)["tensors"]}
assert sorted(t) == ["big", "small"], sorted(t)
assert t["big"]["shape"] == [1073741825] and t["big"]["dtype"] == "uint8", t["big"]'
    ckpt convert -q "$raw" "$out"
    rm -f "$raw"
    # The reference holds every tensor of the input (sha256 of the whole 'big'), so one
    # paddle.load of the output is enough.
    pd_py expected "$out" "$TESTDATA/paddle/expected/split_big.json"
    rm -rf "$WORK/split_out"
}

for protocol in 2 4; do
    for src in "$TESTDATA"/paddle/*.pdparams "$TESTDATA"/paddle/*.pdopt; do
        case_run "convert $(basename "$src") (protocol $protocol)" convert_one "$src" "$protocol"
    done
done
run_batch pd
case_run "split_big.pdparams (1 GiB, split in 2 parts) roundtrip" split_big
finish
