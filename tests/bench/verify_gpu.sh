#!/usr/bin/env bash
# verify on a GPU: one LLaMA-7B-shaped decoder layer (hidden 4096, ffn 11008, 32 heads, 8 KV
# heads and 32, 2048 tokens, bfloat16) timed against its floor (its GEMM FLOPs at the rate
# cuBLAS reaches on the same shapes in the same run; target: within 1.5x), then `ckptconv
# verify` of a whole 7B-shaped pair end to end (reading both, both forwards), with the time
# split the report gives (opening both, starting the device, reading weights, running A,
# running B, comparing).
#
#   tests/bench/verify_gpu.sh [CKPTCONV]   (default: $CKPTCONV, else build/ckptconv; the
#                                           library beside it: build/libckpt.a)
# Environment:
#   BENCH_DEVICE=cpu      run everything on the CPU instead (a check of the script; slow, so
#                         BENCH_TOKENS and BENCH_E2E_LAYERS should be small)
#   BENCH_TOKENS=N        tokens (default 2048)
#   BENCH_E2E_LAYERS=N    layers of the end-to-end pair (default 32, 13 GB per checkpoint;
#                         0 skips it)
#   BENCH_DIR=DIR         where the synthetic checkpoints go (default .bench/verify_gpu)
#   BENCH_TOOL=PATH       a verify_gpu program built already (for a machine without the
#                         libraries' development files); else it is built from libckpt.a
# The checkpoints are made by tests/bench/verify_gpu.c (random bfloat16 weights) and kept
# for the next run. With no GPU (and no BENCH_DEVICE=cpu) the script says so and exits 1:
# the numbers it exists for cannot be measured then.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
LIB="$(dirname "$CKPTCONV")/libckpt.a"
DEVICE="${BENCH_DEVICE:-cuda}"
TOKENS="${BENCH_TOKENS:-2048}"
E2E_LAYERS="${BENCH_E2E_LAYERS:-32}"
DIR="${BENCH_DIR:-$REPO/.bench/verify_gpu}"

die() {
    echo "bench: $*" >&2
    exit 1
}

[ -x "$CKPTCONV" ] || die "no ckptconv at $CKPTCONV (build first)"
mkdir -p "$DIR"
BIN="${BENCH_TOOL:-$DIR/verify_gpu}"
if [ -z "${BENCH_TOOL:-}" ]; then
    [ -f "$LIB" ] || die "no libckpt.a beside $CKPTCONV"
    cc -O2 -DCKPT_BUILD -I"$REPO/include" -I"$REPO/src/verify" -I"$REPO/src" "$REPO/tests/bench/verify_gpu.c" "$LIB" \
        -lz -lzstd -lcjson -ldeflate -fopenmp -lm -ldl -o "$BIN"
fi
if [ "$DEVICE" = cuda ]; then
    out=$("$CKPTCONV" verify "$REPO/testdata/megatron/tp1" "$REPO/testdata/megatron/tp2" --device cuda -q 2>&1) \
        || die "no GPU to measure on: $out"
fi

make_model() { # make_model DIR LAYERS KV_HEADS
    if [ ! -f "$1/.done" ]; then
        echo "bench: writing $1 ($2 layers, $3 KV heads)"
        rm -rf "$1"
        "$BIN" make "$1" "$2" "$3"
        touch "$1/.done"
    fi
}

echo "== one layer, $TOKENS tokens, on $DEVICE"
for kv in 8 32; do
    make_model "$DIR/layer_kv$kv" 1 "$kv"
    "$BIN" layer "$DIR/layer_kv$kv" "$TOKENS" "$DEVICE" | tee "$DIR/layer_kv$kv.txt"
    awk '/^gemm floor:/ { floor = $3 } /x the floor/ { ratio = $2 / floor } END { exit !(ratio <= 1.5) }' \
        "$DIR/layer_kv$kv.txt" &&
        echo "target met:    within 1.5x of the GEMM floor ($kv KV heads)" ||
        echo "target MISSED: within 1.5x of the GEMM floor ($kv KV heads)"
done

if [ "$E2E_LAYERS" -gt 0 ]; then
    echo "== verify of a $E2E_LAYERS-layer 7B-shaped pair, end to end, on $DEVICE"
    make_model "$DIR/e2e_a" "$E2E_LAYERS" 8
    if [ ! -d "$DIR/e2e_b" ]; then
        # B: the same model as one file per layer under other names: hf2mcore at TP 2, so
        # that B is read in another layout and run as tensor-parallel ranks
        "$CKPTCONV" hf2mcore "$DIR/e2e_a" "$DIR/e2e_b" --tp 2 -q
    fi
    sync
    [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches
    start=$(date +%s.%N)
    "$CKPTCONV" verify "$DIR/e2e_a" "$DIR/e2e_b" --device "$DEVICE" --tokens "$TOKENS" >"$DIR/e2e.txt" || true
    end=$(date +%s.%N)
    grep -E '^(A|B|device|PASS|FAIL):' "$DIR/e2e.txt"
    awk -v s="$start" -v e="$end" '/^time:/ { print "wall " sprintf("%.2f", e - s) " s; " $0 }' "$DIR/e2e.txt"
fi
