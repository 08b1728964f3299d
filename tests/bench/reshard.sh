#!/usr/bin/env bash
# reshard benchmark: `ckptconv reshard` on a Megatron-LM legacy checkpoint (TP2 PP2, bf16 weights,
# fp32 master copies and Adam moments, >= 2 GB) to TP4 PP1 and back, against `cp -r` of the
# same directory and against the Python way of doing it today (torch.load of every rank file,
# cat/chunk by Megatron's rules, torch.save per target rank: tests/bench/reshard_python.py).
#
#   tests/bench/reshard.sh [CKPTCONV]      (default: $CKPTCONV, else build/ckptconv; builds nothing)
#
# Environment:
#   BENCH_REPEAT=N        run each tool N times and keep the fastest (default 1)
#   RESHARD_MEMORY=SIZE   --memory given to ckptconv (default 512M, its default)
#   RESHARD_TEMPLATE=DIR  the real Megatron checkpoint whose structure the input copies
#                         (default testdata/megatron/tp2pp2_bf16_optim)
#   RESHARD_GEN_ARGS      other sizes for make_megatron_bench.py (e.g. "--layers 4 --hidden 512")
#   TORCH_PYTHON          Python with torch (default /usr/bin/python3, Debian's torch 1.13)
#   BENCH_STRICT=1        exit 1 when a target is missed (a differing output always fails)
#   BENCH_CACHE=warm      keep the page cache (CPU cost only); default cold
#   BENCH_KEEP=1          keep the outputs (.bench/reshard_out/{1,2}_{ck,py}) to look into a difference
#   BENCH_BASELINE=EXE    another ckptconv (an older build) measured the same way, each of its runs
#                         just before one of ckptconv's, and shown next to it
#
# The input is generated once by make_megatron_bench.py (8 layers, hidden 1024, SwiGLU ffn 2816,
# 16 heads in 4 query groups, NullTokenizer vocabulary 50257 padded to 50432 at TP2 and to
# 50688 at TP4, two AdamW steps' worth of state: 2.7 GB) and cached in .bench/ (ignored by
# git); it is regenerated when the generator or the template change. Each run is measured
# with GNU time (wall seconds, peak RSS); the page cache is dropped before each run when
# /proc/sys/vm/drop_caches is writable (root), otherwise runs are warm-cache and the table
# says so. While ckptconv runs, /proc/PID/status is sampled every 50 ms for its anonymous
# (RssAnon: its own buffers) and file-backed (RssFile: mapped input pages the kernel may
# drop) resident memory (tests/bench/lib.sh).
#
# Direction 1 reshards the input to TP4 PP1, direction 2 reshards ckptconv's TP4 PP1 output
# back to TP2 PP2 (both tools read the same input). reshard_compare.py then checks, per
# direction, that ckptconv and the Python reference wrote the same checkpoint (rank files,
# keys and their order, args, bit-equal model and optimizer tensors, rng state), and that the
# round trip TP2 PP2 -> TP4 PP1 -> TP2 PP2 gives back the input (rng_state and args.rank /
# local_rank of ranks that did not exist in TP4 PP1 come from another rank, so those are not
# compared there).
# Targets: ckptconv at least 3x faster than the Python reference, within 1.25x of cp -r + sync,
# and its anonymous peak RSS within --memory plus a fixed allowance.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
TEMPLATE="${RESHARD_TEMPLATE:-$REPO/testdata/megatron/tp2pp2_bf16_optim}"
REPEAT="${BENCH_REPEAT:-1}"
MEMORY="${RESHARD_MEMORY:-512M}"
BASELINE="${BENCH_BASELINE:-}"
# Anonymous memory the budget does not cover: code, libc, tensor tables, pickle trees.
RSS_ALLOWANCE_MB=64
TIME=/usr/bin/time
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"


[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
"$CKPTCONV" reshard --help >/dev/null 2>&1 \
    || die "$CKPTCONV has no working 'reshard' command ('$CKPTCONV reshard --help' fails): build a newer ckptconv"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$TORCH_PYTHON" -c 'import torch, numpy' 2>/dev/null || die "torch and numpy do not import in $TORCH_PYTHON"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline
[ -f "$TEMPLATE/latest_checkpointed_iteration.txt" ] \
    || die "no Megatron template checkpoint at $TEMPLATE (testdata/gen/README_megatron.md; or set RESHARD_TEMPLATE)"

MEMORY_BYTES=$(size_bytes "$MEMORY") || die "RESHARD_MEMORY=$MEMORY: expected a size such as 512M or 2G"

mkdir -p "$BENCH_DIR"
IN="$BENCH_DIR/megatron_tp2pp2"
megatron_bench_input "$IN" "$TEMPLATE" "${RESHARD_GEN_ARGS:-}"
SIZE=$(du -sb "$IN" | cut -f1)
NFILES=$(find "$IN" -name model_optim_rng.pt | wc -l)

OUT="$BENCH_DIR/reshard_out"
rm -rf "$OUT"
# Alive at once: the direction-1 output of ckptconv (input of direction 2), and per direction
# a copy, ckptconv's and the Python output; the vocabulary grows a little at TP4.
need_free_disk 5
mkdir -p "$OUT"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$OUT"' EXIT

choose_cache

declare -A CHECK
failed=0
# compare KEY A B [reshard_compare.py options]: records the verdict, never stops the run.
compare() {
    local key="$1" a="$2" b="$3" msg
    shift 3
    if msg=$("$TORCH_PYTHON" "$REPO/tests/bench/reshard_compare.py" "$a" "$b" "$@" 2>&1); then
        CHECK[$key]="ok: $msg"
    else
        CHECK[$key]="DIFFERENT: $msg"
        failed=1
    fi
}

# direction D NAME IN TP PP: cp, cp+sync, ckptconv and Python for one direction; ckptconv's
# output stays in $OUT/D_ck, Python's in $OUT/D_py.
direction() {
    local d="$1" src="$2" tp="$3" pp="$4"
    echo "bench: $d: cp -r, cp -r + sync, ckptconv reshard, reshard_python.py"
    measure "cp:$d" "$OUT/cp" cp -r "$src" "$OUT/cp"
    rm -rf "$OUT/cp"
    # ckptconv fsyncs its outputs before renaming them into place; cp does not. `sync -f`
    # makes the comparison like for like.
    # shellcheck disable=SC2016
    measure "cp+sync:$d" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$src" "$OUT/cp"
    rm -rf "$OUT/cp"
    measure_ckptconv ":$d" "$OUT/${d}_ck" reshard "$src" "$OUT/${d}_ck" --tp "$tp" --pp "$pp" --memory "$MEMORY" -q
    measure "python:$d" "$OUT/${d}_py" "$TORCH_PYTHON" "$REPO/tests/bench/reshard_python.py" "$src" \
        "$OUT/${d}_py" --tp "$tp" --pp "$pp"
    echo "bench: $d: comparing ckptconv's output with the Python reference's"
    compare "$d" "$OUT/${d}_ck" "$OUT/${d}_py"
}

direction 1 "$IN" 4 1
[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$OUT/1_py"
direction 2 "$OUT/1_ck" 2 2
echo "bench: round trip: comparing the input with ckptconv's TP2 PP2 -> TP4 PP1 -> TP2 PP2"
compare rt "$IN" "$OUT/2_ck" --ignore rng_state --ignore-arg rank --ignore-arg local_rank


echo
echo "reshard benchmark: Megatron-LM checkpoint, $(awk -v s="$SIZE" 'BEGIN { printf "%.2f GB", s / 1e9 }') in" \
     "$NFILES rank files (bf16 weights, fp32 masters, Adam moments), $(nproc) cores, $CACHE"
echo "ckptconv: $CKPTCONV reshard IN OUT --tp N --pp M --memory $MEMORY -q"
[ -z "$BASELINE" ] || echo "baseline: $BASELINE, the same arguments"
for d in 1 2; do
    case $d in
        1) title="TP2 PP2 -> TP4 PP1" ;;
        2) title="TP4 PP1 -> TP2 PP2 (ckptconv's output of 1 as input)" ;;
    esac
    echo
    echo "$d. $title"
    printf '%-10s %8s %12s %9s %9s %16s %15s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "wall / ckptconv" \
        "RSS / ckptconv"
    for tool in $(with_baseline cp "cp+sync" baseline ckptconv python); do
        printf '%-10s %8.2f %12s %9s %9s %16s %15s\n' "$tool" "${WALL[$tool:$d]}" "$(mb "${RSS[$tool:$d]}")" \
            "$(mb "${ANON[$tool:$d]}")" "$(mb "${FILEB[$tool:$d]}")" \
            "$(ratio "${WALL[$tool:$d]}" "${WALL[ckptconv:$d]}")" "$(ratio "${RSS[$tool:$d]}" "${RSS[ckptconv:$d]}")"
    done
    report_baseline ":$d"
    echo "python / ckptconv:   wall $(ratio "${WALL[python:$d]}" "${WALL[ckptconv:$d]}")x," \
         "peak RSS $(ratio "${RSS[python:$d]}" "${RSS[ckptconv:$d]}")x"
    echo "ckptconv / cp+sync:  wall $(ratio "${WALL[ckptconv:$d]}" "${WALL[cp+sync:$d]}")x" \
         "(of cp: $(ratio "${WALL[ckptconv:$d]}" "${WALL[cp:$d]}")x)"
    echo "ckptconv peak RSS:   $(mb "${RSS[ckptconv:$d]}") MB; sampled peaks $(mb "${ANON[ckptconv:$d]}") MB" \
         "anonymous, $(mb "${FILEB[ckptconv:$d]}") MB file-backed (--memory $MEMORY)"
    echo "check: ${CHECK[$d]}"
    check_target "ckptconv at least 3x faster than the Python reference ($(ratio "${WALL[python:$d]}" "${WALL[ckptconv:$d]}")x)" \
        "$(awk -v p="${WALL[python:$d]}" -v c="${WALL[ckptconv:$d]}" 'BEGIN { print (p >= 3 * c) ? 1 : 0 }')"
    check_target "ckptconv wall time within 1.25x of cp -r + sync ($(ratio "${WALL[ckptconv:$d]}" "${WALL[cp+sync:$d]}")x)" \
        "$(awk -v c="${WALL[ckptconv:$d]}" -v s="${WALL[cp+sync:$d]}" 'BEGIN { print (c <= 1.25 * s) ? 1 : 0 }')"
    check_target "ckptconv anonymous peak RSS within --memory $MEMORY + ${RSS_ALLOWANCE_MB} MB" \
        "$(awk -v r="${ANON[ckptconv:$d]}" -v m="$MEMORY_BYTES" -v a="$RSS_ALLOWANCE_MB" \
            'BEGIN { print (r * 1024 <= m + a * 2^20) ? 1 : 0 }')"
done
echo
echo "round trip: ${CHECK[rt]}"
if [ "$failed" = 1 ]; then
    die "outputs differ (see the check lines above)"
fi
if [ "$missed" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
