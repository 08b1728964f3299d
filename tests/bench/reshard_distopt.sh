#!/usr/bin/env bash
# reshard benchmark with Megatron's distributed optimizer: `ckptconv reshard` of a Megatron-LM
# legacy checkpoint trained with --use-distributed-optimizer (TP2 PP2 DP2: bf16 weights in
# model_optim_rng.pt, fp32 masters and Adam moments in each rank's distrib_optim.pt, >= 2 GB)
# to TP4 PP1 DP1 and back, against `cp -r` (+ `sync`) of the same directory. No other tool
# does this job offline: Megatron itself only changes DP for this state.
#
#   tests/bench/reshard_distopt.sh [CKPTCONV]   (default: $CKPTCONV, else build/ckptconv)
#
# Environment: BENCH_REPEAT, BENCH_CACHE, BENCH_KEEP, BENCH_STRICT, BENCH_BASELINE, TORCH_PYTHON,
# RESHARD_TEMPLATE and RESHARD_GEN_ARGS as for tests/bench/reshard.sh, and
#   RESHARD_MEMORY=SIZE   --memory given to ckptconv (default 512M, its default)
#
# The input is the input of tests/bench/reshard.sh (make_megatron_bench.py: 8 layers, hidden
# 1024, plain optimizer state) given to the distributed optimizer at DP2 by ckptconv itself
# (`reshard --to-distributed-optimizer --dp 2`), made once and cached in .bench/ until the
# generator or the ckptconv binary changes. Direction 1 reshards it to TP4 PP1 DP1, direction 2
# reshards ckptconv's output of 1 back to TP2 PP2 DP2. The round trip must give back the
# input: every distrib_optim.pt byte for byte, and the model tensor for tensor
# (`ckptconv diff`). Each run is measured with GNU time and /proc sampling (tests/bench/lib.sh).
# Targets: within 1.25x of cp -r + sync, anonymous peak RSS within --memory plus a fixed
# allowance.
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
"$CKPTCONV" reshard --help 2>/dev/null | grep -- --to-distributed-optimizer >/dev/null \
    || die "$CKPTCONV reshard has no --to-distributed-optimizer: build a newer ckptconv"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$TORCH_PYTHON" -c 'import torch, numpy' 2>/dev/null || die "torch and numpy do not import in $TORCH_PYTHON"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline
[ -f "$TEMPLATE/latest_checkpointed_iteration.txt" ] \
    || die "no Megatron template checkpoint at $TEMPLATE (testdata/gen/README_megatron.md; or set RESHARD_TEMPLATE)"
MEMORY_BYTES=$(size_bytes "$MEMORY") || die "RESHARD_MEMORY=$MEMORY: expected a size such as 512M or 2G"

mkdir -p "$BENCH_DIR"
PLAIN="$BENCH_DIR/megatron_tp2pp2"
megatron_bench_input "$PLAIN" "$TEMPLATE" "${RESHARD_GEN_ARGS:-}"
IN="$BENCH_DIR/megatron_distopt_tp2pp2dp2"
ID="$(cat "$PLAIN.done" "$CKPTCONV" | sha256sum | cut -c1-16)"
if [ ! -f "$IN/latest_checkpointed_iteration.txt" ] || [ "$(cat "$IN.done" 2>/dev/null)" != "$ID" ]; then
    echo "bench: giving $PLAIN to the distributed optimizer at DP2 (once)"
    rm -rf "$IN" "$IN.done"
    "$CKPTCONV" reshard "$PLAIN" "$IN" --tp 2 --pp 2 --dp 2 --to-distributed-optimizer -q
    echo "$ID" >"$IN.done"
fi
SIZE=$(du -sb "$IN" | cut -f1)
NFILES=$(find "$IN" -name distrib_optim.pt | wc -l)
[ "$NFILES" = 4 ] || die "$IN: expected 4 distrib_optim.pt files, found $NFILES"

OUT="$BENCH_DIR/reshard_distopt_out"
rm -rf "$OUT"
need_free_disk 4
mkdir -p "$OUT"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$OUT"' EXIT

choose_cache

# direction D IN TP PP DP: cp, cp+sync and ckptconv; ckptconv's output stays in $OUT/D_ck.
direction() {
    local d="$1" src="$2" tp="$3" pp="$4" dp="$5"
    echo "bench: $d: cp -r, cp -r + sync, ckptconv reshard"
    measure "cp:$d" "$OUT/cp" cp -r "$src" "$OUT/cp"
    rm -rf "$OUT/cp"
    # ckptconv fsyncs its outputs before renaming them into place; cp does not.
    # shellcheck disable=SC2016
    measure "cp+sync:$d" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$src" "$OUT/cp"
    rm -rf "$OUT/cp"
    measure_ckptconv ":$d" "$OUT/${d}_ck" reshard "$src" "$OUT/${d}_ck" --tp "$tp" --pp "$pp" --dp "$dp" \
        --memory "$MEMORY" -q
}

direction 1 "$IN" 4 1 1
direction 2 "$OUT/1_ck" 2 2 2

echo "bench: round trip: comparing the input with ckptconv's TP2 PP2 DP2 -> TP4 PP1 DP1 -> TP2 PP2 DP2"
roundtrip="ok: every distrib_optim.pt is byte-identical, the model equal tensor for tensor"
failed=0
while IFS= read -r -d '' f; do
    rel="${f#"$IN"/}"
    if ! cmp -s "$f" "$OUT/2_ck/$rel"; then
        roundtrip="DIFFERENT: $rel"
        failed=1
        break
    fi
done < <(find "$IN" -name distrib_optim.pt -print0 | sort -z)
if [ "$failed" = 0 ] && ! msg=$("$CKPTCONV" diff "$IN" "$OUT/2_ck" 2>&1); then
    roundtrip="DIFFERENT: model: $(echo "$msg" | tail -n 3)"
    failed=1
fi

echo
echo "reshard benchmark, distributed optimizer: Megatron-LM checkpoint, $(awk -v s="$SIZE" \
    'BEGIN { printf "%.2f GB", s / 1e9 }') in $NFILES ranks (bf16 weights; fp32 masters and Adam moments" \
     "in distrib_optim.pt), $(nproc) cores, $CACHE"
echo "ckptconv: $CKPTCONV reshard IN OUT --tp N --pp M --dp K --memory $MEMORY -q"
[ -z "$BASELINE" ] || echo "baseline: $BASELINE, the same arguments"
for d in 1 2; do
    case $d in
        1) title="TP2 PP2 DP2 -> TP4 PP1 DP1" ;;
        2) title="TP4 PP1 DP1 -> TP2 PP2 DP2 (ckptconv's output of 1 as input)" ;;
    esac
    echo
    echo "$d. $title"
    printf '%-10s %8s %12s %9s %9s %16s %15s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "wall / ckptconv" \
        "RSS / ckptconv"
    for tool in $(with_baseline cp "cp+sync" baseline ckptconv); do
        printf '%-10s %8.2f %12s %9s %9s %16s %15s\n' "$tool" "${WALL[$tool:$d]}" "$(mb "${RSS[$tool:$d]}")" \
            "$(mb "${ANON[$tool:$d]}")" "$(mb "${FILEB[$tool:$d]}")" \
            "$(ratio "${WALL[$tool:$d]}" "${WALL[ckptconv:$d]}")" "$(ratio "${RSS[$tool:$d]}" "${RSS[ckptconv:$d]}")"
    done
    report_baseline ":$d"
    echo "ckptconv / cp+sync:  wall $(ratio "${WALL[ckptconv:$d]}" "${WALL[cp+sync:$d]}")x" \
         "(of cp: $(ratio "${WALL[ckptconv:$d]}" "${WALL[cp:$d]}")x)"
    echo "ckptconv peak RSS:   $(mb "${RSS[ckptconv:$d]}") MB; sampled peaks $(mb "${ANON[ckptconv:$d]}") MB" \
         "anonymous, $(mb "${FILEB[ckptconv:$d]}") MB file-backed (--memory $MEMORY)"
    check_target "ckptconv wall time within 1.25x of cp -r + sync ($(ratio "${WALL[ckptconv:$d]}" "${WALL[cp+sync:$d]}")x)" \
        "$(awk -v c="${WALL[ckptconv:$d]}" -v s="${WALL[cp+sync:$d]}" 'BEGIN { print (c <= 1.25 * s) ? 1 : 0 }')"
    check_target "ckptconv anonymous peak RSS within --memory $MEMORY + ${RSS_ALLOWANCE_MB} MB" \
        "$(awk -v r="${ANON[ckptconv:$d]}" -v m="$MEMORY_BYTES" -v a="$RSS_ALLOWANCE_MB" \
            'BEGIN { print (r * 1024 <= m + a * 2^20) ? 1 : 0 }')"
done
echo
echo "round trip: $roundtrip"
[ "$failed" = 0 ] || die "the round trip does not give back the input"
if [ "$missed" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
