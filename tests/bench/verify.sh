#!/usr/bin/env bash
# verify on the CPU, next to the torch way: a 4-layer LLaMA-7B-shaped bfloat16 model (hidden
# 4096, ffn 11008, 32 heads, 8 KV heads, vocabulary 32000: 2.2 GB) against the same model
# after hf2mcore (TP 2) and mcore2hf. ckptconv reads A as it is and B's Megatron files as
# two ranks; the torch script (tests/bench/verify_python.py, what users write today) loads
# both Hugging Face directories whole and runs each layer in torch. Both use 64 tokens.
# Prints wall time and peak RSS of each, and their ratios.
#
#   tests/bench/verify.sh [CKPTCONV]     (default: $CKPTCONV, else build/ckptconv)
# Environment: BENCH_REPEAT=N (best of N, default 1), BENCH_CACHE=warm (keep the page cache;
# default: dropped before each run when /proc/sys/vm/drop_caches is writable),
# VENV_PYTHON (default .venv/bin/python: Debian's torch and safetensors).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
REPEAT="${BENCH_REPEAT:-1}"
DIR="$REPO/.bench/verify"
TIME=/usr/bin/time

die() {
    echo "bench: $*" >&2
    exit 1
}

[ -x "$CKPTCONV" ] || die "no ckptconv at $CKPTCONV (build first)"
[ -x "$TIME" ] || die "GNU time is missing: run scripts/install-deps.sh"
"$VENV_PYTHON" -c 'import torch, safetensors' 2>/dev/null || die "$VENV_PYTHON lacks torch or safetensors"
mkdir -p "$DIR"
if [ ! -f "$DIR/.done" ]; then
    echo "bench: writing the models (once)"
    rm -rf "$DIR"/a "$DIR"/mc "$DIR"/b
    cc -O2 -DCKPT_BUILD -I"$REPO/include" -I"$REPO/src/verify" -I"$REPO/src" "$REPO/tests/bench/verify_gpu.c" \
        "$(dirname "$CKPTCONV")/libckpt.a" -lz -lzstd -lcjson -ldeflate -fopenmp -lm -ldl -o "$DIR/make_model"
    "$DIR/make_model" make "$DIR/a" 4 8
    "$CKPTCONV" hf2mcore "$DIR/a" "$DIR/mc" --tp 2 -q
    "$CKPTCONV" mcore2hf "$DIR/mc" "$DIR/b" -q
    touch "$DIR/.done"
fi

if [ "${BENCH_CACHE:-cold}" != warm ] && (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
    CACHE=cold
    drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
else
    CACHE=warm
    drop() { :; }
fi

# measure NAME CMD...: best wall time of REPEAT runs and its peak RSS, into WALL[NAME], RSS[NAME]
declare -A WALL RSS
measure() {
    local name="$1" i w r best="" best_rss=""
    shift
    for ((i = 0; i < REPEAT; i++)); do
        drop
        "$TIME" -f '%e %M' -o "$DIR/time.log" "$@" >"$DIR/$name.out" 2>&1 || { cat "$DIR/$name.out"; die "$name failed"; }
        read -r w r <"$DIR/time.log"
        if [ -z "$best" ] || awk -v a="$w" -v b="$best" 'BEGIN { exit !(a < b) }'; then
            best=$w
            best_rss=$r
        fi
    done
    WALL[$name]=$best
    RSS[$name]=$best_rss
}

measure ckptconv "$CKPTCONV" verify "$DIR/a" "$DIR/mc" --device cpu --tokens 64
measure torch "$VENV_PYTHON" "$REPO/tests/bench/verify_python.py" "$DIR/a" "$DIR/b" --tokens 64

echo "verify benchmark: 4-layer LLaMA-7B-shaped bfloat16 model ($(du -sh "$DIR/a" | cut -f1)) against its"
echo "hf2mcore TP2 output (ckptconv) / its mcore2hf round trip (torch), 64 tokens, $(nproc) cores, $CACHE cache"
printf '%-10s %10s %14s\n' tool "wall s" "peak RSS MB"
for t in ckptconv torch; do
    printf '%-10s %10.2f %14.1f\n' "$t" "${WALL[$t]}" "$(awk -v k="${RSS[$t]}" 'BEGIN { print k / 1024 }')"
done
awk -v a="${WALL[torch]}" -v b="${WALL[ckptconv]}" -v c="${RSS[torch]}" -v d="${RSS[ckptconv]}" \
    'BEGIN { printf "torch / ckptconv: wall %.2fx, peak RSS %.1fx\n", a / b, c / d }'
grep -E '^(PASS|FAIL)' "$DIR/ckptconv.out"
grep -c 'rel L2' "$DIR/torch.out" | sed 's/^/torch script compared: /'
