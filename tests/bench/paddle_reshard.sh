#!/usr/bin/env bash
# PaddleNLP reshard benchmark: `ckptconv reshard` on a LLaMA-shaped PaddleNLP checkpoint (bf16
# weights, fp32 AdamW moments and master weights, >= 2 GB) from PP4 TP1 to TP2 PP2, against
# `cp -r` of the same directory and against the Python way of doing it today (paddle.load of
# every rank file, merge and split by PaddleNLP's rules, paddle.save per target rank:
# tests/bench/paddle_reshard_python.py).
#
#   tests/bench/paddle_reshard.sh [CKPTCONV]   (default: $CKPTCONV, else build/ckptconv; builds nothing)
#
# Environment:
#   BENCH_DIR=DIR              scratch directory for the input and the outputs
#                              (default $TMPDIR/ckptconv-bench, /tmp when TMPDIR is unset)
#   BENCH_REPEAT=N             run each tool N times and keep the fastest (default 1)
#   PADDLE_RESHARD_MEMORY=SIZE --memory given to ckptconv (default 512M, its default)
#   PADDLE_RESHARD_GEN_ARGS    other sizes for make_paddle_bench.py (e.g. "--layers 12")
#   VENV_PYTHON                Python with paddlepaddle and numpy (default .venv/bin/python)
#   BENCH_STRICT=1             exit 1 when a target is missed (a differing output always fails)
#   BENCH_CACHE=warm           keep the page cache (CPU cost only); default cold
#   BENCH_KEEP=1               keep the outputs (BENCH_DIR/paddle_reshard_out/{ck,py})
#   BENCH_BASELINE=EXE         another ckptconv (an older build) measured the same way, each of
#                              its runs just before one of ckptconv's, and shown next to it
#
# The input is generated once by make_paddle_bench.py (PP4 TP1; hidden 1024, intermediate
# 2816, 16 heads in 4 KV groups, 8 layers, vocabulary 32000; model_state.ppYY.pdparams with
# bf16 weights and the name table, optimizer.ppYY.pdopt with fp32 moments, beta pows, master
# weights and LR_Scheduler, as paddle.save writes them: 2.17 GB in 8 files) and kept in
# BENCH_DIR; it is regenerated when the generator or its arguments change. Each run is
# measured with GNU time (wall seconds, peak RSS); the page cache is dropped before each run
# when /proc/sys/vm/drop_caches is writable (root), otherwise runs are warm-cache and the table
# says so. While ckptconv runs, /proc/PID/status is sampled every 50 ms for its anonymous
# (RssAnon: its own buffers) and file-backed (RssFile: mapped input pages the kernel may drop)
# resident memory (tests/bench/lib.sh). Afterwards paddle_reshard_python.py --compare checks
# that ckptconv and the Python reference wrote the same checkpoint: the same files, config.json,
# and per model/optimizer file the same keys in the same order, name table, tuple names,
# dtypes, shapes and bytes of every tensor.
# Targets: ckptconv at least 3x faster than the Python reference, within 1.25x of cp -r + sync,
# and its anonymous peak RSS within --memory plus a fixed allowance.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="${BENCH_DIR:-${TMPDIR:-/tmp}/ckptconv-bench}"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
REPEAT="${BENCH_REPEAT:-1}"
MEMORY="${PADDLE_RESHARD_MEMORY:-512M}"
BASELINE="${BENCH_BASELINE:-}"
GEN_ARGS="${PADDLE_RESHARD_GEN_ARGS:-}"
# Anonymous memory the budget does not cover: code, libc, tensor tables, pickle trees.
RSS_ALLOWANCE_MB=64
TIME=/usr/bin/time
GEN="$REPO/tests/bench/make_paddle_bench.py"
PYREF="$REPO/tests/bench/paddle_reshard_python.py"
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"


[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
"$CKPTCONV" reshard --help >/dev/null 2>&1 \
    || die "$CKPTCONV has no working 'reshard' command ('$CKPTCONV reshard --help' fails): build a newer ckptconv"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$VENV_PYTHON" -c 'import paddle, numpy' 2>/dev/null \
    || die "paddle and numpy do not import in $VENV_PYTHON: run scripts/install-deps.sh"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline

MEMORY_BYTES=$(size_bytes "$MEMORY") || die "PADDLE_RESHARD_MEMORY=$MEMORY: expected a size such as 512M or 2G"

mkdir -p "$BENCH_DIR"
IN="$BENCH_DIR/paddle_pp4"
STAMP="$IN.done"
GEN_ID="$( {
    echo "$GEN_ARGS"
    cat "$GEN"
} | sha256sum | cut -c1-16)"
if [ ! -f "$IN/config.json" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$GEN_ID" ]; then
    echo "bench: generating $IN (once)"
    rm -rf "$IN" "$STAMP"
    # shellcheck disable=SC2086
    "$VENV_PYTHON" -W ignore "$GEN" "$IN" --pp 4 $GEN_ARGS
    echo "$GEN_ID" >"$STAMP"
fi
SIZE=$(du -sb "$IN" | cut -f1)
NFILES=$(find "$IN" -name '*.pdparams' -o -name '*.pdopt' | wc -l)

OUT="$BENCH_DIR/paddle_reshard_out"
rm -rf "$OUT"
# Alive at once: ckptconv's output and the Python output (the copy is removed before them).
need_free_disk 2
mkdir -p "$OUT"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$OUT"' EXIT

choose_cache

TP=2
PP=2
echo "bench: cp -r, cp -r + sync, ckptconv reshard, paddle_reshard_python.py (PP4 -> TP$TP PP$PP)"
measure cp "$OUT/cp" cp -r "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
# ckptconv fsyncs its outputs before renaming them into place; cp does not. `sync -f` makes the
# comparison like for like.
# shellcheck disable=SC2016
measure "cp+sync" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
measure_ckptconv "" "$OUT/ck" reshard "$IN" "$OUT/ck" --tp "$TP" --pp "$PP" --memory "$MEMORY" -q
measure python "$OUT/py" "$VENV_PYTHON" -W ignore "$PYREF" "$IN" "$OUT/py" --tp "$TP" --pp "$PP"
echo "bench: comparing ckptconv's output with the Python reference's"
failed=0
if msg=$("$VENV_PYTHON" -W ignore "$PYREF" --compare "$OUT/ck" "$OUT/py" 2>&1); then
    CHECK="ok: $msg"
else
    CHECK="DIFFERENT: $msg"
    failed=1
fi


echo
echo "paddle reshard benchmark: PaddleNLP LLaMA checkpoint, $(awk -v s="$SIZE" 'BEGIN { printf "%.2f GB", s / 1e9 }')" \
     "in $NFILES rank files (bf16 weights, fp32 masters, AdamW moments), PP4 TP1 -> TP$TP PP$PP," \
     "$(nproc) cores, $CACHE"
echo "ckptconv: $CKPTCONV reshard IN OUT --tp $TP --pp $PP --memory $MEMORY -q"
[ -z "$BASELINE" ] || echo "baseline: $BASELINE, the same arguments"
printf '%-10s %8s %12s %9s %9s %16s %15s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "wall / ckptconv" \
    "RSS / ckptconv"
for tool in $(with_baseline cp "cp+sync" baseline ckptconv python); do
    printf '%-10s %8.2f %12s %9s %9s %16s %15s\n' "$tool" "${WALL[$tool]}" "$(mb "${RSS[$tool]}")" \
        "$(mb "${ANON[$tool]}")" "$(mb "${FILEB[$tool]}")" \
        "$(ratio "${WALL[$tool]}" "${WALL[ckptconv]}")" "$(ratio "${RSS[$tool]}" "${RSS[ckptconv]}")"
done
report_baseline
echo "python / ckptconv:   wall $(ratio "${WALL[python]}" "${WALL[ckptconv]}")x," \
     "peak RSS $(ratio "${RSS[python]}" "${RSS[ckptconv]}")x"
echo "ckptconv / cp+sync:  wall $(ratio "${WALL[ckptconv]}" "${WALL[cp+sync]}")x" \
     "(of cp: $(ratio "${WALL[ckptconv]}" "${WALL[cp]}")x)"
echo "ckptconv peak RSS:   $(mb "${RSS[ckptconv]}") MB; sampled peaks $(mb "${ANON[ckptconv]}") MB" \
     "anonymous, $(mb "${FILEB[ckptconv]}") MB file-backed (--memory $MEMORY)"
echo "check: $CHECK"
check_target "ckptconv at least 3x faster than the Python reference ($(ratio "${WALL[python]}" "${WALL[ckptconv]}")x)" \
    "$(awk -v p="${WALL[python]}" -v c="${WALL[ckptconv]}" 'BEGIN { print (p >= 3 * c) ? 1 : 0 }')"
check_target "ckptconv wall time within 1.25x of cp -r + sync ($(ratio "${WALL[ckptconv]}" "${WALL[cp+sync]}")x)" \
    "$(awk -v c="${WALL[ckptconv]}" -v s="${WALL[cp+sync]}" 'BEGIN { print (c <= 1.25 * s) ? 1 : 0 }')"
check_target "ckptconv anonymous peak RSS within --memory $MEMORY + ${RSS_ALLOWANCE_MB} MB" \
    "$(awk -v r="${ANON[ckptconv]}" -v m="$MEMORY_BYTES" -v a="$RSS_ALLOWANCE_MB" \
        'BEGIN { print (r * 1024 <= m + a * 2^20) ? 1 : 0 }')"
if [ "$failed" = 1 ]; then
    die "outputs differ (see the check line above)"
fi
if [ "$missed" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
