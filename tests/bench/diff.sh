#!/usr/bin/env bash
# diff benchmark: `ckptconv diff` on a pair of 2.1 GB bfloat16 safetensors files, next to the
# comparison users write today (tests/bench/diff_python.py: each tensor pair loaded with
# safetensors and compared in torch). B is A with every element of lm_head.weight moved by
# one bfloat16 step and one element of layer 2's down_proj by +0.5, so that both tools go
# through the arithmetic of a real difference as well as the equal tensors. Both compare with
# rtol 1e-2, atol 1 (every difference is within it: exit 0) and must agree on each tensor's
# max abs, max rel, mismatched count and first index. Prints wall time and peak RSS of each,
# and their ratios.
#
#   tests/bench/diff.sh [CKPTCONV]      (default: $CKPTCONV, else build/ckptconv)
#
# The pair is made once with Debian's torch (tests/bench/make_bf16_big.py, then converted by
# ckptconv) and kept in .bench/diff/ (ignored by git). Environment: BENCH_REPEAT=N (best of
# N, default 1), BENCH_CACHE=warm (keep the page cache; default: dropped before each run when
# /proc/sys/vm/drop_caches is writable), BENCH_THREADS (ckptconv's --threads; default: all
# cores), VENV_PYTHON (default .venv/bin/python: torch, safetensors and numpy).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
REPEAT="${BENCH_REPEAT:-1}"
BASELINE=""
DIR="$REPO/.bench/diff"
TIME=/usr/bin/time
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"

[ -x "$CKPTCONV" ] || die "no ckptconv at $CKPTCONV (build first, or pass its path)"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$VENV_PYTHON" -c 'import torch, safetensors, numpy' 2>/dev/null \
    || die "$VENV_PYTHON lacks torch, safetensors or numpy: run scripts/install-deps.sh"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"

mkdir -p "$DIR"
GEN_ID="pair-1 $(sha256sum "$REPO/tests/bench/make_bf16_big.py" | cut -c1-16)"
if [ "$(cat "$DIR/.done" 2>/dev/null)" != "$GEN_ID" ]; then
    echo "bench: writing the pair (once)"
    rm -f "$DIR/a.safetensors" "$DIR/b.safetensors" "$DIR/.done"
    [ -f "$DIR/a.pt" ] || "$TORCH_PYTHON" "$REPO/tests/bench/make_bf16_big.py" "$DIR/a.pt"
    "$CKPTCONV" convert -q "$DIR/a.pt" "$DIR/a.safetensors"
    rm -f "$DIR/a.pt"
    cp "$DIR/a.safetensors" "$DIR/b.safetensors"
    "$VENV_PYTHON" - "$DIR/b.safetensors" <<'EOF'
import json, struct, sys
import numpy as np
path = sys.argv[1]
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
base = 8 + n
def region(name):
    lo, hi = header[name]["data_offsets"]
    return np.memmap(path, dtype=np.uint16, mode="r+", offset=base + lo, shape=((hi - lo) // 2,))
head = region("lm_head.weight")
head[:] += 1  # one bfloat16 step (the mantissa's last bit) for every element
head.flush()
down = region("model.layers.2.mlp.down_proj.weight")
at = 4096 * 11008 // 2 + 7
value = np.frombuffer((down[at:at + 1].astype(np.uint32) << 16).tobytes(), dtype=np.float32)[0] + 0.5
down[at] = np.frombuffer(np.float32(value).tobytes(), dtype=np.uint32)[0] >> 16
down.flush()
EOF
    echo "$GEN_ID" >"$DIR/.done"
fi
SIZE=$(stat -c %s "$DIR/a.safetensors")

OUT="$DIR/out"
rm -rf "$OUT"
mkdir -p "$OUT"
choose_cache

THREADS_OPT=()
[ -z "${BENCH_THREADS:-}" ] || THREADS_OPT=(--threads "$BENCH_THREADS")
measure ckptconv "" "$CKPTCONV" diff "$DIR/a.safetensors" "$DIR/b.safetensors" --rtol 1e-2 --atol 1 --json \
    "${THREADS_OPT[@]}"
cp "$OUT/cmd.log" "$OUT/ckptconv.json"
measure python "" "$VENV_PYTHON" "$REPO/tests/bench/diff_python.py" "$DIR/a.safetensors" "$DIR/b.safetensors" \
    1e-2 1 "$OUT/python.json"

# both must report the same tensors with the same figures
"$VENV_PYTHON" - "$OUT/ckptconv.json" "$OUT/python.json" <<'EOF' || die "ckptconv and the Python script disagree"
import json, math, sys
ours = {t["name"]: t for t in json.load(open(sys.argv[1]))["tensors"] if t["status"] != "equal"}
theirs = json.load(open(sys.argv[2]))
assert set(ours) == set(theirs), (sorted(ours), sorted(theirs))
for name, t in theirs.items():
    o = ours[name]
    assert math.isclose(o["max_abs"], t["max_abs"], rel_tol=1e-12), (name, o["max_abs"], t["max_abs"])
    assert math.isclose(o["max_rel"], t["max_rel"], rel_tol=1e-12), (name, o["max_rel"], t["max_rel"])
    assert o["mismatched"] == t["mismatched"] and o["first_index"] == t["first"], (name, o, t)
    print(f"agree: {name}: max abs {o['max_abs']:.6g}, max rel {o['max_rel']:.6g}, first at {o['first_index']}")
EOF

echo
echo "diff of two $(awk -v s="$SIZE" 'BEGIN { printf "%.2f", s / 1e9 }') GB bfloat16 safetensors files" \
    "($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), page cache: $CACHE, best of $REPEAT)"
printf "%-10s %10s %14s\n" tool "wall (s)" "peak RSS (MB)"
for t in ckptconv python; do
    printf "%-10s %10s %14s\n" "$t" "${WALL[$t]}" "$(mb "${RSS[$t]}")"
done
echo "ckptconv: anonymous $(mb "${ANON[ckptconv]}") MB, file-backed $(mb "${FILEB[ckptconv]}") MB at their peaks"
echo "python / ckptconv: wall $(ratio "${WALL[python]}" "${WALL[ckptconv]}")x," \
    "peak RSS $(ratio "${RSS[python]}" "${RSS[ckptconv]}")x"
