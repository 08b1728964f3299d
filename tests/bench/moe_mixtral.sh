#!/usr/bin/env bash
# MoE benchmark, Mixtral: `ckptconv hf2mcore --ep` of a Mixtral-shaped Hugging Face model (bf16
# safetensors, 1.8 GB) to a Megatron-LM mcore checkpoint at EP8 TP1 PP2, against the Python way
# of doing it today on the same input, and next to `cp -r` + `sync` of the input and of the
# output (ckptconv writes the dense weights once per expert-parallel rank, so its output is
# larger than its input: copying the output is copying the same bytes).
#
#   tests/bench/moe_mixtral.sh [CKPTCONV]     (default: $CKPTCONV, else build/ckptconv; builds nothing)
#
# Environment:
#   VENV_PYTHON           Python with numpy for the input generator and torch + safetensors for
#                         the reference (default .venv/bin/python: Debian's torch 1.13)
#   TORCH_PYTHON          Python with torch for the comparisons (default /usr/bin/python3)
#   MOE_MEMORY=SIZE       --memory given to ckptconv (default 512M, its default)
#   MOE_BENCH_GEN_ARGS    other sizes for make_hf_bench.py (default: 8 layers, hidden 2048, 16
#                         heads in 4 KV groups, 8 experts of ffn 1792, top-2, vocabulary 32000)
#   BENCH_REPEAT=N        run each tool N times and keep the fastest (default 1)
#   BENCH_STRICT=1        exit 1 when a target is missed (a differing output always fails)
#   BENCH_CACHE=warm      keep the page cache (CPU cost only); default cold
#   BENCH_KEEP=1          keep the outputs (.bench/moe_out/{ck,ref,hf})
#   BENCH_BASELINE=EXE    another ckptconv (an older build) measured the same way
#
# 1. hf2mcore IN OUT --tp 1 --pp 2 --ep 8 --transformer-impl local. The reference is
#    tests/bench/moe_python.py: what the usual conversion scripts do (load every shard with
#    safetensors.torch.load_file, build each rank's state dict, torch.save). hf_compare.py
#    megatron checks that both wrote the same rank files, keys in the same order, every tensor
#    bit-equal and args equal in the fields of the layout, the model and the experts.
# 2. Round trip: mcore2hf of ckptconv's output must give back the input's tensors (checked, not
#    timed).
# Targets (the MoE issue's): ckptconv within 1.3x of cp + sync of the same bytes (its output),
# peak RSS under 1 GB; and the project's: 3x the reference's speed, anonymous RSS within --memory.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
REPEAT="${BENCH_REPEAT:-1}"
MEMORY="${MOE_MEMORY:-512M}"
BASELINE="${BENCH_BASELINE:-}"
GEN_ARGS="${MOE_BENCH_GEN_ARGS:---layers 8 --hidden 2048 --heads 16 --kv-heads 4 --experts 8 --ffn 1792 --top-k 2}"
RSS_ALLOWANCE_MB=64
TIME=/usr/bin/time
TP=1
PP=2
EP=8
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"

[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
"$CKPTCONV" hf2mcore --help 2>&1 | grep -q -- '--ep' \
    || die "$CKPTCONV has no 'hf2mcore --ep': build a newer ckptconv"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$VENV_PYTHON" -c 'import torch, safetensors, numpy' 2>/dev/null \
    || die "torch, safetensors and numpy do not import in $VENV_PYTHON: run scripts/install-deps.sh"
"$TORCH_PYTHON" -c 'import torch, numpy' 2>/dev/null || die "torch and numpy do not import in $TORCH_PYTHON"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline
MEMORY_BYTES=$(size_bytes "$MEMORY") || die "MOE_MEMORY=$MEMORY: expected a size such as 512M or 2G"

mkdir -p "$BENCH_DIR"
IN="$BENCH_DIR/hf_mixtral"
hf_bench_input "$IN" "$GEN_ARGS"
SIZE=$(du -sb "$IN" | cut -f1)

OUT="$BENCH_DIR/moe_out"
rm -rf "$OUT"
# Alive at once: ckptconv's output and the reference's or a copy (each about 2.6x the input at EP8: the
# dense weights on every expert-parallel rank).
need_free_disk 6
mkdir -p "$OUT"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$OUT"' EXIT

choose_cache

declare -A CHECK
failed=0

echo "bench: 1: cp -r + sync of the input, ckptconv hf2mcore, moe_python.py, cp -r + sync of the output (EP$EP TP$TP PP$PP)"
measure "cp:1" "$OUT/cp" cp -r "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
# shellcheck disable=SC2016
measure "cp+sync:1" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
measure_ckptconv ":1" "$OUT/ck" hf2mcore "$IN" "$OUT/ck" --tp "$TP" --pp "$PP" --ep "$EP" \
    --transformer-impl local --memory "$MEMORY" -q
OUT_SIZE=$(du -sb "$OUT/ck" | cut -f1)
# shellcheck disable=SC2016
measure "cp+sync:out" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$OUT/ck" "$OUT/cp"
rm -rf "$OUT/cp"
measure "ref:1" "$OUT/ref" "$VENV_PYTHON" "$REPO/tests/bench/moe_python.py" "$IN" "$OUT/ref" --pp "$PP" --ep "$EP"
echo "bench: 1: comparing ckptconv's output with the reference's"
hf_compare 1 megatron "$OUT/ck" "$OUT/ref"
[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$OUT/ref"
echo "bench: 2: round trip (mcore2hf of ckptconv's output against the input)"
"$CKPTCONV" mcore2hf "$OUT/ck" "$OUT/hf" --memory "$MEMORY" -q
hf_compare rt hf "$IN" "$OUT/hf"

gb() { awk -v s="$1" 'BEGIN { printf "%.2f GB", s / 1e9 }'; }
echo
echo "MoE benchmark: Hugging Face Mixtral-shaped model, $(gb "$SIZE") of bf16 safetensors" \
     "($GEN_ARGS) -> EP$EP TP$TP PP$PP, $(gb "$OUT_SIZE") written, $(nproc) cores, $CACHE"
echo "1: $CKPTCONV hf2mcore IN OUT --tp $TP --pp $PP --ep $EP --transformer-impl local --memory $MEMORY -q"
echo "   ref: tests/bench/moe_python.py IN OUT --pp $PP --ep $EP (load_file, build each rank, torch.save)"
[ -z "$BASELINE" ] || echo "baseline: $BASELINE, the same arguments"
WALL[cp+sync-out:1]=${WALL[cp+sync:out]}
RSS[cp+sync-out:1]=${RSS[cp+sync:out]}
echo
echo "1. hf2mcore: Hugging Face -> EP$EP TP$TP PP$PP (ref: Python script)"
printf '%-12s %8s %12s %9s %9s %16s %15s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "wall / ckptconv" \
    "RSS / ckptconv"
for tool in $(with_baseline cp "cp+sync" "cp+sync-out" baseline ckptconv ref); do
    printf '%-12s %8.2f %12s %9s %9s %16s %15s\n' "$tool" "${WALL[$tool:1]}" "$(mb "${RSS[$tool:1]}")" \
        "$(mb "${ANON[$tool:1]:-}")" "$(mb "${FILEB[$tool:1]:-}")" \
        "$(ratio "${WALL[$tool:1]}" "${WALL[ckptconv:1]}")" "$(ratio "${RSS[$tool:1]}" "${RSS[ckptconv:1]}")"
done
report_baseline ":1"
echo "ref / ckptconv:          wall $(ratio "${WALL[ref:1]}" "${WALL[ckptconv:1]}")x," \
     "peak RSS $(ratio "${RSS[ref:1]}" "${RSS[ckptconv:1]}")x"
echo "ckptconv / cp+sync out:  wall $(ratio "${WALL[ckptconv:1]}" "${WALL[cp+sync-out:1]}")x" \
     "(of cp + sync of the input: $(ratio "${WALL[ckptconv:1]}" "${WALL[cp+sync:1]}")x)"
echo "check: ${CHECK[1]}"
echo "round trip: ${CHECK[rt]}"
check_target "ckptconv within 1.3x of cp + sync of the same bytes ($(ratio "${WALL[ckptconv:1]}" "${WALL[cp+sync-out:1]}")x)" \
    "$(awk -v c="${WALL[ckptconv:1]}" -v p="${WALL[cp+sync-out:1]}" 'BEGIN { print (c <= 1.3 * p) ? 1 : 0 }')"
check_target "ckptconv peak RSS under 1 GB ($(mb "${RSS[ckptconv:1]}") MB)" \
    "$(awk -v r="${RSS[ckptconv:1]}" 'BEGIN { print (r < 1024 * 1024) ? 1 : 0 }')"
check_target "ckptconv at least 3x faster than the reference ($(ratio "${WALL[ref:1]}" "${WALL[ckptconv:1]}")x)" \
    "$(awk -v p="${WALL[ref:1]}" -v c="${WALL[ckptconv:1]}" 'BEGIN { print (p >= 3 * c) ? 1 : 0 }')"
check_target "ckptconv anonymous peak RSS within --memory $MEMORY + ${RSS_ALLOWANCE_MB} MB" \
    "$(awk -v r="${ANON[ckptconv:1]}" -v m="$MEMORY_BYTES" -v a="$RSS_ALLOWANCE_MB" \
        'BEGIN { print (r * 1024 <= m + a * 2^20) ? 1 : 0 }')"
if [ "$failed" = 1 ]; then
    die "outputs differ (see the check lines above)"
fi
if [ "$missed" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
