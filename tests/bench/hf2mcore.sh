#!/usr/bin/env bash
# hf2mcore / mcore2hf benchmark: `ckptconv hf2mcore` of a LLaMA-shaped Hugging Face model
# (bf16 safetensors, 1.34 GB) to a Megatron-LM mcore checkpoint at TP2 PP2, against Megatron-LM's
# own converter on the same input, and `ckptconv mcore2hf` of that checkpoint back to Hugging
# Face against the Python way of doing it today; both next to `cp -r` of the same bytes.
#
#   tests/bench/hf2mcore.sh [CKPTCONV]     (default: $CKPTCONV, else build/ckptconv; builds nothing)
#
# Environment:
#   MEGATRON_LM=DIR       a Megatron-LM source tree with tools/checkpoint/loader_llama_mistral.py
#                         (core_v0.16.1; main dropped that loader in May 2026)     (required)
#   MEGATRON_PYTHON=EXE   Python with torch 2, megatron-core and Megatron-LM's requirements,
#                         transformers 4.31 to 4.x (the loader asserts minor >= 31, which 5.x
#                         fails) and accelerate                                     (required)
#   VENV_PYTHON           Python with torch and safetensors for the mcore2hf reference
#                         (default .venv/bin/python: Debian's torch 1.13)
#   TORCH_PYTHON          Python with torch for the comparisons (default /usr/bin/python3)
#   HF2MCORE_MEMORY=SIZE  --memory given to ckptconv (default 512M, its default)
#   HF_BENCH_GEN_ARGS     other sizes for make_hf_bench.py (e.g. "--layers 4 --hidden 1024"; the
#                         input is shared with paddle_hf.sh)
#   BENCH_REPEAT=N        run each tool N times and keep the fastest (default 1)
#   BENCH_STRICT=1        exit 1 when a target is missed (a differing output always fails)
#   BENCH_CACHE=warm      keep the page cache (CPU cost only); default cold
#   BENCH_KEEP=1          keep the outputs (.bench/hf2mcore_out/{1,2}_{ck,ref})
#   BENCH_BASELINE=EXE    another ckptconv (an older build) measured the same way, each of its runs
#                         just before one of ckptconv's, and shown next to it
#
# The input is generated once by make_hf_bench.py (12 layers, hidden 2048, SwiGLU ffn 5632, 16
# heads in 4 KV groups, vocabulary 32000 with a word-level tokenizer Megatron's loader reads,
# untied lm_head, 2 shards: 1.34 GB) and cached in .bench/ (ignored by git); it is regenerated
# when the generator or its arguments change. Each run is measured with GNU time (wall seconds,
# peak RSS of the largest process: Megatron's converter runs its loader and its saver as two
# processes, which hold their copies of the model at the same time, so its figure is a floor);
# the page cache is dropped before each run when /proc/sys/vm/drop_caches is writable (root),
# otherwise runs are warm-cache and the table says so. While ckptconv runs, /proc/PID/status is
# sampled every 50 ms for its anonymous and file-backed resident memory (tests/bench/lib.sh).
#
# 1. hf2mcore, TP2 PP2. The reference is what Megatron-LM users run:
#      tools/checkpoint/convert.py --model-type GPT --loader llama_mistral --checkpoint-type hf
#        --model-size llama3 --saver core --target-tensor-parallel-size 2
#        --target-pipeline-parallel-size 2 --saver-transformer-impl local --bf16
#    run through tests/bench/megatron_convert.py, which makes core_v0.16.1's converter run on a
#    CPU without Transformer Engine (it changes no weight; its header lists what it patches).
#    Both write Megatron's local layer names (--transformer-impl local): Megatron's saver builds
#    the model it saves, and Transformer Engine's layers do not build without TE. The vocabulary
#    is a multiple of 128 x TP, so neither pads it (Megatron pads by repeating the last row,
#    ckptconv with zeros). hf_compare.py megatron checks that both wrote the same rank files, the
#    same model keys in the same order, every tensor bit-equal and args equal in the fields that
#    define the layout and the model (the rest of args is each tool's own record of its run).
# 2. mcore2hf of ckptconv's TP2 PP2 output. Megatron-LM has no mcore -> Hugging Face converter
#    for GPT models (tools/checkpoint's savers write Megatron formats, and LLaVA; Megatron-Bridge's
#    export_ckpt is documented for the NeMo container on GPUs and is not set up here), so the
#    reference is the script users write: torch.load of every rank file, merge by Megatron's rules,
#    rename, safetensors.torch.save_file (tests/bench/mcore2hf_python.py). hf_compare.py hf
#    checks that both wrote the same tensors (bit-equal) and config.json sizes, and that the
#    round trip HF -> TP2 PP2 -> HF gives back the input's tensors.
# Targets: ckptconv at least 3x faster than the reference, its anonymous peak RSS within
# --memory plus a fixed allowance.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
MEGATRON_LM="${MEGATRON_LM:-}"
MEGATRON_PYTHON="${MEGATRON_PYTHON:-}"
REPEAT="${BENCH_REPEAT:-1}"
MEMORY="${HF2MCORE_MEMORY:-512M}"
BASELINE="${BENCH_BASELINE:-}"
GEN_ARGS="${HF_BENCH_GEN_ARGS:-}"
# Anonymous memory the budget does not cover: code, libc, tensor tables, pickle trees.
RSS_ALLOWANCE_MB=64
TIME=/usr/bin/time
TP=2
PP=2
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"


[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
"$CKPTCONV" hf2mcore --help >/dev/null 2>&1 \
    || die "$CKPTCONV has no working 'hf2mcore' command: build a newer ckptconv"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
[ -f "${MEGATRON_LM:-/nonexistent}/tools/checkpoint/loader_llama_mistral.py" ] \
    || die "MEGATRON_LM=${MEGATRON_LM:-(unset)}: set it to a Megatron-LM tree with tools/checkpoint/loader_llama_mistral.py (git checkout core_v0.16.1)"
"${MEGATRON_PYTHON:-false}" -c 'import torch, megatron.core, transformers, accelerate' 2>/dev/null \
    || die "MEGATRON_PYTHON=${MEGATRON_PYTHON:-(unset)}: set it to a Python with torch, megatron-core, transformers 4.x and accelerate"
"$VENV_PYTHON" -c 'import torch, safetensors, numpy' 2>/dev/null \
    || die "torch, safetensors and numpy do not import in $VENV_PYTHON: run scripts/install-deps.sh"
"$TORCH_PYTHON" -c 'import torch, numpy' 2>/dev/null || die "torch and numpy do not import in $TORCH_PYTHON"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline

MEMORY_BYTES=$(size_bytes "$MEMORY") || die "HF2MCORE_MEMORY=$MEMORY: expected a size such as 512M or 2G"

mkdir -p "$BENCH_DIR"
IN="$BENCH_DIR/hf_llama"
hf_bench_input "$IN" "$GEN_ARGS"
SIZE=$(du -sb "$IN" | cut -f1)

OUT="$BENCH_DIR/hf2mcore_out"
rm -rf "$OUT"
# Alive at once: ckptconv's hf2mcore output (input of 2), Megatron's (removed after its check),
# then ckptconv's and the Python mcore2hf outputs.
need_free_disk 4
mkdir -p "$OUT"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$OUT"' EXIT

choose_cache

declare -A CHECK
failed=0

echo "bench: 1: cp -r, cp -r + sync, ckptconv hf2mcore, Megatron-LM convert.py (TP$TP PP$PP)"
measure "cp:1" "$OUT/cp" cp -r "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
# ckptconv fsyncs its outputs before renaming them into place; cp does not.
# shellcheck disable=SC2016
measure "cp+sync:1" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$IN" "$OUT/cp"
rm -rf "$OUT/cp"
measure_ckptconv ":1" "$OUT/1_ck" hf2mcore "$IN" "$OUT/1_ck" --tp "$TP" --pp "$PP" --transformer-impl local \
    --memory "$MEMORY" -q
measure "ref:1" "$OUT/1_ref" "$MEGATRON_PYTHON" "$REPO/tests/bench/megatron_convert.py" "$MEGATRON_LM" \
    --model-type GPT --loader llama_mistral --saver core --checkpoint-type hf --model-size llama3 \
    --load-dir "$IN" --save-dir "$OUT/1_ref" --tokenizer-model "$IN" --bf16 \
    --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" --saver-transformer-impl local \
    --megatron-path "$MEGATRON_LM"
# convert.py exits 0 when its saver process fails
[ -f "$OUT/1_ref/latest_checkpointed_iteration.txt" ] || {
    tail -n 30 "$OUT/cmd.log" >&2
    die "Megatron-LM's convert.py wrote no checkpoint"
}
echo "bench: 1: comparing ckptconv's output with Megatron-LM's"
hf_compare 1 megatron "$OUT/1_ck" "$OUT/1_ref"
[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$OUT/1_ref"

echo "bench: 2: cp -r, cp -r + sync, ckptconv mcore2hf, mcore2hf_python.py (ckptconv's TP$TP PP$PP output)"
measure "cp:2" "$OUT/cp" cp -r "$OUT/1_ck" "$OUT/cp"
rm -rf "$OUT/cp"
# shellcheck disable=SC2016
measure "cp+sync:2" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$OUT/1_ck" "$OUT/cp"
rm -rf "$OUT/cp"
measure_ckptconv ":2" "$OUT/2_ck" mcore2hf "$OUT/1_ck" "$OUT/2_ck" --memory "$MEMORY" -q
measure "ref:2" "$OUT/2_ref" "$VENV_PYTHON" "$REPO/tests/bench/mcore2hf_python.py" "$OUT/1_ck" "$OUT/2_ref"
echo "bench: 2: comparing ckptconv's output with the Python reference's, and with the input"
hf_compare 2 hf "$OUT/2_ck" "$OUT/2_ref"
hf_compare rt hf "$IN" "$OUT/2_ck"


echo
echo "hf2mcore / mcore2hf benchmark: Hugging Face LLaMA-shaped model, $(awk -v s="$SIZE" 'BEGIN { printf "%.2f GB", s / 1e9 }')" \
     "of bf16 safetensors, TP$TP PP$PP, $(nproc) cores, $CACHE"
echo "1: $CKPTCONV hf2mcore IN OUT --tp $TP --pp $PP --transformer-impl local --memory $MEMORY -q"
echo "   ref: Megatron-LM $(git -C "$MEGATRON_LM" describe --tags 2>/dev/null || echo "($MEGATRON_LM)")" \
     "tools/checkpoint/convert.py --loader llama_mistral --saver core (through megatron_convert.py)"
echo "2: $CKPTCONV mcore2hf IN OUT --memory $MEMORY -q"
echo "   ref: tests/bench/mcore2hf_python.py IN OUT (torch.load, merge, rename, safetensors save_file)"
[ -z "$BASELINE" ] || echo "baseline: $BASELINE, the same arguments"
for d in 1 2; do
    case $d in
        1) title="hf2mcore: Hugging Face -> TP$TP PP$PP (ref: Megatron-LM convert.py)" ;;
        2) title="mcore2hf: TP$TP PP$PP (ckptconv's output of 1) -> Hugging Face (ref: Python script)" ;;
    esac
    report_direction "$d" "$title"
done
echo
echo "round trip: ${CHECK[rt]}"
if [ "$failed" = 1 ]; then
    die "outputs differ (see the check lines above)"
fi
if [ "$missed" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
