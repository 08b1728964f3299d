#!/usr/bin/env bash
# Distributed Checkpoint consolidation benchmark: `ckptconv convert DIR OUT.safetensors`
# against what users run today (torch's dcp_to_torch_save, then torch.load and safetensors'
# save_file) and against `cp` of the data files, on a 2.15 GB DCP checkpoint of a LLaMA-like
# model written by torch.distributed.checkpoint.save from world size 2 (DTensors cut by
# rows and by columns; tests/bench/make_dcp_bench.py says how).
#
#   TORCH22_PYTHON=VENV/bin/python tests/bench/dcp.sh [CKPTCONV]   (default: build/ckptconv)
#
# TORCH22_PYTHON must be a python with torch >= 2.2 and safetensors (the environment of
# testdata/gen/README_megatron.md will do); the suite never needs it. The input is cached in
# .bench/dcp/ (ignored by git) and made again when the generator changes. Each run cold
# (page cache dropped before each when root) under GNU time; ckptconv's anonymous and
# file-backed resident memory are sampled (tests/bench/lib.sh). Both outputs must hold the
# same tensors. BENCH_REPEAT=N keeps the fastest of N runs per tool; BENCH_CACHE=warm keeps
# the page cache; BENCH_BASELINE=EXE measures another ckptconv the same way.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench/dcp"
GEN="$REPO/tests/bench/make_dcp_bench.py"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
REPEAT="${BENCH_REPEAT:-1}"
BASELINE="${BENCH_BASELINE:-}"
TIME=/usr/bin/time
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"


PY="${TORCH22_PYTHON:-}"
[ -n "$PY" ] || die "TORCH22_PYTHON is not set: point it at a python with torch >= 2.2 and safetensors"
[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$PY" -c 'import sys, torch, safetensors
sys.exit(tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 2))' >/dev/null 2>&1 \
    || die "torch >= 2.2 and safetensors do not import in TORCH22_PYTHON=$PY"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline

mkdir -p "$BENCH_DIR"
IN="$BENCH_DIR/ckpt"
GEN_ID="$(sha256sum "$GEN" | cut -c1-16)"
if ! [ -d "$IN" ] || [ "$(cat "$BENCH_DIR/ckpt.done" 2>/dev/null)" != "$GEN_ID" ]; then
    rm -rf "$IN" "$BENCH_DIR/ckpt.done"
    echo "bench: writing the DCP input in $IN (once)"
    OMP_NUM_THREADS=1 "$PY" -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 \
        --master_port "$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" \
        "$GEN" make "$IN" >"$BENCH_DIR/make.log" 2>&1 || { tail -20 "$BENCH_DIR/make.log"; die "generating the input failed"; }
    echo "$GEN_ID" >"$BENCH_DIR/ckpt.done"
fi

OUT="$BENCH_DIR/out"
rm -rf "$OUT"
mkdir -p "$OUT"
trap 'rm -rf "$OUT"' EXIT

choose_cache

in_bytes=$(du -sb "$IN" | cut -f1)
echo "bench: cp, cp+sync, dcp_to_torch_save + safetensors, ckptconv"
measure cp "$OUT/cp/" cp -r "$IN" "$OUT/cp/"
measure cp+sync "$OUT/cp/" sh -c 'cp -r "$1" "$2" && cd "$2" && sync -f .' sh "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
measure torch "$OUT/torch.safetensors" "$PY" "$GEN" torch_consolidate "$IN" "$OUT/torch.safetensors"
measure_ckptconv "" "$OUT/ck.safetensors" convert -q "$IN" "$OUT/ck.safetensors"
out_bytes=$(stat -c %s "$OUT/ck.safetensors")
same=$("$PY" "$GEN" compare "$OUT/torch.safetensors" "$OUT/ck.safetensors" 2>&1) \
    || { echo "$same" >&2; die "ckptconv's output differs from torch's"; }

echo
echo "dcp benchmark: ckptconv convert DIR OUT.safetensors vs torch $("$PY" -c 'import torch; print(torch.__version__)')" \
    "dcp_to_torch_save + safetensors save_file"
echo "input $(awk -v b="$in_bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }') in $(find "$IN" -name '*.distcp' | wc -l)" \
    "data files, output $(awk -v b="$out_bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }'); $(nproc) cores, $CACHE"
printf '%-12s %9s %13s %9s %9s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB"
for t in $(with_baseline cp cp+sync torch baseline ckptconv); do
    printf '%-12s %9.2f %13s %9s %9s\n' "$t" "${WALL[$t]}" "$(mb "${RSS[$t]}")" "$(mb "${ANON[$t]}")" "$(mb "${FILEB[$t]}")"
done
report_baseline
echo "check: $same"
echo "torch / ckptconv: wall time $(ratio "${WALL[torch]}" "${WALL[ckptconv]}")x, peak RSS $(ratio "${RSS[torch]}" "${RSS[ckptconv]}")x"
echo "ckptconv / cp: wall time $(ratio "${WALL[ckptconv]}" "${WALL[cp]}")x (/ cp+sync: $(ratio "${WALL[ckptconv]}" "${WALL[cp+sync]}")x)"
