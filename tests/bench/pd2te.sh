#!/usr/bin/env bash
# pd2te benchmark: `ckptconv pd2te` on a LLaMA-7B-shaped PaddleNLP checkpoint (bf16, fewer
# layers, >= 2 GB) against the Python way of doing it today (paddle.load + transpose + concat
# + paddle.save, tests/bench/pd2te_python.py) and against `cp -r` of the same directory.
#
#   tests/bench/pd2te.sh [CKPTCONV]      (default: build/ckptconv; builds nothing)
#
# Environment:
#   BENCH_REPEAT=N     run each tool N times and keep the fastest (default 1)
#   PD2TE_MEMORY=SIZE  --memory given to ckptconv, e.g. 512M or 2G (default 512M); the table
#                      compares ckptconv's peak RSS with it
#   PD2TE_LAYERS=N     decoder layers of the generated input (default 5: 2.55 GB)
#   VENV_PYTHON        Python with paddlepaddle and numpy (default .venv/bin/python)
#   BENCH_STRICT=1     exit 1 when a target is missed
#   BENCH_CACHE=warm   keep the page cache (CPU cost only); default cold
#   BENCH_BASELINE=EXE another ckptconv (an older build) measured the same way, each of its
#                      runs just before one of ckptconv's, and shown next to it
#
# The input is generated once by make_llama_pd.py and cached in .bench/ (ignored by git).
# Each run is measured with GNU time (wall seconds, peak RSS); the page cache is dropped
# before each run when /proc/sys/vm/drop_caches is writable (root), otherwise runs are
# warm-cache and the table says so. While ckptconv runs, /proc/PID/status is sampled every
# 50 ms for its anonymous (RssAnon: its own buffers) and file-backed (RssFile: mapped input
# pages, which the kernel may drop) resident memory (tests/bench/lib.sh). Afterwards
# pd2te_compare.py checks that ckptconv and the Python converter wrote the same tensors
# (names, dtypes, shapes, SHA-256 of the bytes).
# Targets: ckptconv at least 10x faster than the Python converter, and its peak RSS within
# the --memory budget (plus a fixed allowance for the program itself), not the model size;
# file-backed pages included, since reads of transposed tensors hand theirs back as they go.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
REPEAT="${BENCH_REPEAT:-1}"
MEMORY="${PD2TE_MEMORY:-512M}"
LAYERS="${PD2TE_LAYERS:-5}"
BASELINE="${BENCH_BASELINE:-}"
# Peak RSS the budget does not cover: code, libc and the tensor tables.
RSS_ALLOWANCE_MB=64
TIME=/usr/bin/time
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"


[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
"$CKPTCONV" pd2te --help >/dev/null 2>&1 \
    || die "$CKPTCONV has no working 'pd2te' command ('$CKPTCONV pd2te --help' fails): build a newer ckptconv"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$VENV_PYTHON" -c 'import paddle, numpy' 2>/dev/null \
    || die "paddle and numpy do not import in $VENV_PYTHON: run scripts/install-deps.sh"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
[[ "$LAYERS" =~ ^[1-9][0-9]*$ ]] || die "PD2TE_LAYERS=$LAYERS: expected a positive integer"
check_baseline

MEMORY_BYTES=$(size_bytes "$MEMORY") || die "PD2TE_MEMORY=$MEMORY: expected a size such as 512M or 2G"

mkdir -p "$BENCH_DIR"
IN="$BENCH_DIR/llama_pd_L$LAYERS"
STAMP="$IN.done"
GEN_ID="$(sha256sum "$REPO/tests/bench/make_llama_pd.py" | cut -c1-16)"
if [ ! -f "$IN/model_state.pdparams" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$GEN_ID" ]; then
    echo "bench: generating $IN (once)"
    rm -rf "$IN" "$STAMP"
    "$VENV_PYTHON" -W ignore "$REPO/tests/bench/make_llama_pd.py" "$IN" --layers "$LAYERS"
    echo "$GEN_ID" >"$STAMP"
fi
SIZE=$(du -sb "$IN" | cut -f1)

OUT="$BENCH_DIR/pd2te_out"
rm -rf "$OUT"
# The copy, ckptconv's output and the Python output live side by side until the comparison.
need_free_disk 3
mkdir -p "$OUT"
trap 'rm -rf "$OUT"' EXIT

if [ "${BENCH_CACHE:-cold}" = warm ]; then
    CACHE="warm (BENCH_CACHE=warm: input read once before, page cache kept)"
    drop_caches() { :; }
    cat "$IN"/* >/dev/null
elif ( sync && echo 3 >/proc/sys/vm/drop_caches ) 2>/dev/null; then
    CACHE="cold (page cache dropped before each run)"
    drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
else
    echo "bench: cannot drop the page cache (needs root); runs are warm-cache"
    CACHE="warm (cannot drop the page cache without root; input read once before)"
    drop_caches() { :; }
    cat "$IN"/* >/dev/null
fi

measure cp "$OUT/cp" cp -r "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
# ckptconv fsyncs its outputs before renaming them into place; cp does not. `sync DIR`
# makes the comparison like for like.
# shellcheck disable=SC2016
measure "cp+sync" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
measure_ckptconv "" "$OUT/ckptconv" pd2te "$IN" "$OUT/ckptconv" --force --memory "$MEMORY"
measure python "$OUT/python" "$VENV_PYTHON" "$REPO/tests/bench/pd2te_python.py" "$IN" "$OUT/python"

echo
echo "pd2te benchmark: $(awk -v s="$SIZE" 'BEGIN { printf "%.2f GB", s / 1e9 }') PaddleNLP LLaMA-7B shape," \
     "$LAYERS layers, bf16 -> TE names, $(nproc) cores, $CACHE"
echo "ckptconv: $CKPTCONV pd2te IN OUT --force --memory $MEMORY"
[ -z "$BASELINE" ] || echo "baseline: $BASELINE, the same arguments"
printf '%-10s %8s %12s %9s %9s %16s %15s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "wall / ckptconv" "RSS / ckptconv"
for tool in $(with_baseline cp "cp+sync" baseline ckptconv python); do
    printf '%-10s %8.2f %12s %9s %9s %16s %15s\n' "$tool" "${WALL[$tool]}" "$(mb "${RSS[$tool]}")" \
        "$(mb "${ANON[$tool]}")" "$(mb "${FILEB[$tool]}")" \
        "$(ratio "${WALL[$tool]}" "${WALL[ckptconv]}")" "$(ratio "${RSS[$tool]}" "${RSS[ckptconv]}")"
done
echo "python / ckptconv:  wall $(ratio "${WALL[python]}" "${WALL[ckptconv]}")x," \
     "peak RSS $(ratio "${RSS[python]}" "${RSS[ckptconv]}")x"
echo "ckptconv / cp:      wall $(ratio "${WALL[ckptconv]}" "${WALL[cp]}")x" \
     "(of cp+sync: $(ratio "${WALL[ckptconv]}" "${WALL[cp+sync]}")x)"
echo "ckptconv peak RSS:  $(awk -v r="${RSS[ckptconv]}" 'BEGIN { printf "%.1f", r / 1024 }') MB" \
     "for --memory $MEMORY ($(awk -v m="$MEMORY_BYTES" 'BEGIN { printf "%.1f", m / 2^20 }') MB):" \
     "$(awk -v r="${RSS[ckptconv]}" -v m="$MEMORY_BYTES" 'BEGIN { printf "%.2f", r * 1024 / m }')x the budget," \
     "$(awk -v r="${RSS[ckptconv]}" -v s="$SIZE" 'BEGIN { printf "%.1f%%", 100 * r * 1024 / s }') of the input;" \
     "sampled peaks $(mb "${ANON[ckptconv]}") MB anonymous, $(mb "${FILEB[ckptconv]}") MB file-backed"
report_baseline

echo
"$VENV_PYTHON" "$REPO/tests/bench/pd2te_compare.py" "$OUT/ckptconv" "$OUT/python" \
    || die "ckptconv and the Python converter wrote different tensors"

check_target "ckptconv at least 10x faster than the Python converter ($(ratio "${WALL[python]}" "${WALL[ckptconv]}")x)" \
    "$(awk -v p="${WALL[python]}" -v c="${WALL[ckptconv]}" 'BEGIN { print (p >= 10 * c) ? 1 : 0 }')"
check_target "ckptconv peak RSS within --memory $MEMORY + ${RSS_ALLOWANCE_MB} MB" \
    "$(awk -v r="${RSS[ckptconv]}" -v m="$MEMORY_BYTES" -v a="$RSS_ALLOWANCE_MB" \
        'BEGIN { print (r * 1024 <= m + a * 2^20) ? 1 : 0 }')"
if [ "$missed" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
