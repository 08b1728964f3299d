#!/usr/bin/env bash
# MoE benchmark: `ckptconv hf2mcore` of a DeepSeek-V3-shaped slice as DeepSeek released its
# weights (FP8 E4M3 with 128 x 128 float32 block scales; the released widths: MLA with 128 heads,
# 256 routed experts of 2048 and a shared one; one dense layer and one MoE layer, 12.1 GB) to a
# Megatron-LM mcore checkpoint at EP8 TP1 PP2, dequantised to bf16 as it is read, next to
# `cp -r` + `sync` of the input and of the output. The Mixtral-shaped benchmark with the Python
# reference is tests/bench/moe_mixtral.sh.
#
#   tests/bench/moe.sh [CKPTCONV]     (default: $CKPTCONV, else build/ckptconv; builds nothing)
#
# Environment:
#   VENV_PYTHON           Python with numpy for the input generator (default .venv/bin/python)
#   TORCH_PYTHON          Python with torch and numpy for the check (default /usr/bin/python3)
#   MOE_MEMORY=SIZE       --memory given to ckptconv (default 512M, its default)
#   MOE_BENCH_GEN_ARGS    other sizes for make_deepseek_bench.py (default: its own, the released
#                         widths, 2 layers of which 1 dense, vocabulary 1024)
#   BENCH_REPEAT=N        run each tool N times and keep the fastest (default 1)
#   BENCH_STRICT=1        exit 1 when a target is missed (a wrong output always fails)
#   BENCH_CACHE=warm      keep the page cache (CPU cost only); default cold
#   BENCH_KEEP=1          keep ckptconv's output (.bench/moe_ds_out/ck)
#   BENCH_BASELINE=EXE    another ckptconv (an older build) measured the same way
#
# Measured: hf2mcore IN OUT --tp 1 --pp 2 --ep 8 --transformer-impl local. ckptconv writes
# about 2.9x the input: the experts in bf16 (twice their FP8 bytes), and the dense weights once
# per expert-parallel rank, as Megatron-LM keeps them. So "the same bytes" is its output: cp +
# sync of the output, a rank file at a time (each copy synced and removed before the next, since
# a second copy of the whole output does not fit beside it on a usual disk), next to cp + sync
# of the input.
# Not run: the transformers/torch way (load every shard, dequantise, split, torch.save). It
# holds the 12.1 GB of FP8 weights and their 24 GB of bf16 at once, more memory than a 24 GB
# machine has, and it needs torch >= 2.1 for float8 (Debian's torch 1.13 has none).
# Checked (not timed): tests/bench/fp8_check.py compares every tensor of every rank file with
# numpy's own dequantisation of the input, bit for bit.
# Targets (the MoE issue's): ckptconv within 1.3x of cp + sync of the same bytes, peak RSS
# under 1 GB; and the project's: anonymous RSS within --memory.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
REPEAT="${BENCH_REPEAT:-1}"
MEMORY="${MOE_MEMORY:-512M}"
BASELINE="${BENCH_BASELINE:-}"
GEN_ARGS="${MOE_BENCH_GEN_ARGS:-}"
RSS_ALLOWANCE_MB=64
TIME=/usr/bin/time
TP=1
PP=2
EP=8
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"

[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
"$CKPTCONV" hf2mcore --help 2>&1 | grep -q 'deepseek_v3' \
    || die "$CKPTCONV does not convert deepseek_v3: build a newer ckptconv"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$VENV_PYTHON" -c 'import numpy' 2>/dev/null || die "numpy does not import in $VENV_PYTHON: run scripts/install-deps.sh"
"$TORCH_PYTHON" -c 'import torch, numpy' 2>/dev/null || die "torch and numpy do not import in $TORCH_PYTHON"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline
MEMORY_BYTES=$(size_bytes "$MEMORY") || die "MOE_MEMORY=$MEMORY: expected a size such as 512M or 2G"

mkdir -p "$BENCH_DIR"
IN="$BENCH_DIR/hf_deepseek"
hf_bench_input "$IN" "$GEN_ARGS" "$REPO/tests/bench/make_deepseek_bench.py"
SIZE=$(du -sb "$IN" | cut -f1)

OUT="$BENCH_DIR/moe_ds_out"
rm -rf "$OUT"
# Alive at once: ckptconv's output (about 2.9x the input) and one copied rank file (0.3x).
FREE=$(df -B1 --output=avail "$BENCH_DIR" | tail -1)
[ "$FREE" -gt $((SIZE * 33 / 10 + (1 << 30))) ] \
    || die "$((SIZE * 33 / 10 / 1000000)) MB of free disk needed in $BENCH_DIR, $((FREE / 1000000)) MB free"
mkdir -p "$OUT"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$OUT"' EXIT

choose_cache

declare -A CHECK
echo "bench: cp -r + sync of the input, ckptconv hf2mcore (EP$EP TP$TP PP$PP), cp + sync of its output"
# shellcheck disable=SC2016
measure "cp+sync:1" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
measure_ckptconv ":1" "$OUT/ck" hf2mcore "$IN" "$OUT/ck" --tp "$TP" --pp "$PP" --ep "$EP" \
    --transformer-impl local --memory "$MEMORY" -q
OUT_SIZE=$(du -sb "$OUT/ck" | cut -f1)
# shellcheck disable=SC2016
measure "cp+sync:out" "$OUT/cp" sh -c 'for f in "$1"/*/*/*; do cp "$f" "$2" && sync -f "$2" && rm "$2"; done' \
    sh "$OUT/ck" "$OUT/cp"
echo "bench: checking every tensor of ckptconv's output against numpy's dequantisation of the input"
failed=0
if msg=$("$TORCH_PYTHON" "$REPO/tests/bench/fp8_check.py" "$IN" "$OUT/ck" "$EP" 2>&1); then
    CHECK[1]="ok: $msg"
else
    CHECK[1]="DIFFERENT: $msg"
    failed=1
fi

gb() { awk -v s="$1" 'BEGIN { printf "%.2f GB", s / 1e9 }'; }
echo
echo "MoE benchmark: Hugging Face DeepSeek-V3-shaped slice, $(gb "$SIZE") of FP8 safetensors" \
     "(make_deepseek_bench.py ${GEN_ARGS:-defaults}) -> EP$EP TP$TP PP$PP bf16, $(gb "$OUT_SIZE") written," \
     "$(nproc) cores, $CACHE"
echo "1: $CKPTCONV hf2mcore IN OUT --tp $TP --pp $PP --ep $EP --transformer-impl local --memory $MEMORY -q"
[ -z "$BASELINE" ] || echo "baseline: $BASELINE, the same arguments"
WALL[cp+sync-out:1]=${WALL[cp+sync:out]}
RSS[cp+sync-out:1]=${RSS[cp+sync:out]}
echo
printf '%-12s %8s %12s %9s %9s %16s %15s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "wall / ckptconv" \
    "RSS / ckptconv"
for tool in $(with_baseline "cp+sync" "cp+sync-out" baseline ckptconv); do
    printf '%-12s %8.2f %12s %9s %9s %16s %15s\n' "$tool" "${WALL[$tool:1]}" "$(mb "${RSS[$tool:1]}")" \
        "$(mb "${ANON[$tool:1]:-}")" "$(mb "${FILEB[$tool:1]:-}")" \
        "$(ratio "${WALL[$tool:1]}" "${WALL[ckptconv:1]}")" "$(ratio "${RSS[$tool:1]}" "${RSS[ckptconv:1]}")"
done
report_baseline ":1"
echo "ckptconv / cp+sync out:  wall $(ratio "${WALL[ckptconv:1]}" "${WALL[cp+sync-out:1]}")x" \
     "(of cp + sync of the input: $(ratio "${WALL[ckptconv:1]}" "${WALL[cp+sync:1]}")x)"
echo "ckptconv throughput:     $(awk -v s="$SIZE" -v w="${WALL[ckptconv:1]}" 'BEGIN { printf "%.0f", s / w / 1e6 }') MB/s" \
     "of FP8 input read, $(awk -v s="$OUT_SIZE" -v w="${WALL[ckptconv:1]}" 'BEGIN { printf "%.0f", s / w / 1e6 }') MB/s written"
echo "ref:                     not run (the transformers/torch way needs the whole model in memory twice, FP8 and" \
     "bf16, and torch >= 2.1)"
echo "check: ${CHECK[1]}"
check_target "ckptconv within 1.3x of cp + sync of the same bytes ($(ratio "${WALL[ckptconv:1]}" "${WALL[cp+sync-out:1]}")x)" \
    "$(awk -v c="${WALL[ckptconv:1]}" -v p="${WALL[cp+sync-out:1]}" 'BEGIN { print (c <= 1.3 * p) ? 1 : 0 }')"
check_target "ckptconv peak RSS under 1 GB ($(mb "${RSS[ckptconv:1]}") MB)" \
    "$(awk -v r="${RSS[ckptconv:1]}" 'BEGIN { print (r < 1024 * 1024) ? 1 : 0 }')"
check_target "ckptconv anonymous peak RSS within --memory $MEMORY + ${RSS_ALLOWANCE_MB} MB" \
    "$(awk -v r="${ANON[ckptconv:1]}" -v m="$MEMORY_BYTES" -v a="$RSS_ALLOWANCE_MB" \
        'BEGIN { print (r * 1024 <= m + a * 2^20) ? 1 : 0 }')"
if [ "$failed" = 1 ]; then
    die "ckptconv's output differs from the input (see the check line above)"
fi
if [ "${missed:-0}" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
