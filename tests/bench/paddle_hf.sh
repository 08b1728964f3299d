#!/usr/bin/env bash
# hf2paddle / paddle2hf benchmark: `ckptconv hf2paddle` of a LLaMA-shaped Hugging Face model (bf16
# safetensors, 1.34 GB) to a single-card PaddleNLP checkpoint, against the PaddleNLP way on the
# same input, and `ckptconv paddle2hf` of the checkpoint PaddleNLP wrote back to Hugging Face,
# against the Python way; both next to `cp -r` of the same bytes.
#
#   tests/bench/paddle_hf.sh [CKPTCONV]    (default: $CKPTCONV, else build/ckptconv; builds nothing)
#
# Environment:
#   PADDLE_PYTHON=EXE       Python with paddlepaddle, paddlenlp (LLaMA) and safetensors   (required)
#   VENV_PYTHON             Python with numpy for the input generator (default .venv/bin/python)
#   TORCH_PYTHON            Python with numpy for the comparisons (default /usr/bin/python3)
#   PADDLE_HF_MEMORY=SIZE   --memory given to ckptconv (default 512M, its default)
#   HF_BENCH_GEN_ARGS       other sizes for make_hf_bench.py (e.g. "--layers 4 --hidden 1024"; the
#                           input is shared with hf2mcore.sh)
#   BENCH_REPEAT=N          run each tool N times and keep the fastest (default 1)
#   BENCH_STRICT=1          exit 1 when a target is missed (a differing output always fails)
#   BENCH_CACHE=warm        keep the page cache (CPU cost only); default cold
#   BENCH_KEEP=1            keep the outputs (.bench/paddle_hf_out/{1,2}_{ck,ref})
#   BENCH_BASELINE=EXE      another ckptconv (an older build) measured the same way, each of its
#                           runs just before one of ckptconv's, and shown next to it
#
# The input is make_hf_bench.py's (12 layers, hidden 2048, SwiGLU ffn 5632, 16 heads in 4 KV
# groups, vocabulary 32000, untied lm_head, 2 shards: 1.34 GB), cached in .bench/ (ignored by
# git) and shared with hf2mcore.sh. Each run is measured with GNU time (wall seconds, peak
# RSS); the page cache is dropped before each run when /proc/sys/vm/drop_caches is writable
# (root), otherwise runs are warm-cache and the table says so. While ckptconv runs,
# /proc/PID/status is sampled every 50 ms for its anonymous and file-backed resident memory
# (tests/bench/lib.sh). References (tests/bench/paddle_hf_python.py):
# 1. hf2paddle: what PaddleNLP offers for a Hugging Face checkpoint,
#    LlamaForCausalLM.from_pretrained(HF_DIR, convert_from_torch=True, dtype="bfloat16") and
#    save_pretrained(OUT) (model_state.pdparams, PaddleNLP's defaults: separate q/k/v and
#    gate/up; from_pretrained also caches its conversion in HF_DIR, which the script removes
#    again). hf_compare.py paddle checks that ckptconv wrote the same structured names in the
#    same order and every tensor bit-equal (the variable names in the name table are each
#    writer's own numbering and are not compared), and config.json's sizes.
# 2. paddle2hf of PaddleNLP's output of 1: PaddleNLP 3.0.0b4 has no export to the Hugging Face
#    layout, so the reference is the script its users write (paddle.load, rename, transpose the
#    Linear weights back, safetensors.paddle.save_file). hf_compare.py hf checks that both wrote
#    the same tensors (bit-equal) and config.json sizes, and that the round trip
#    HF -> PaddleNLP -> HF gives back the input's tensors.
# Targets: ckptconv at least 3x faster than the reference, its anonymous peak RSS within
# --memory plus a fixed allowance.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
PADDLE_PYTHON="${PADDLE_PYTHON:-}"
REPEAT="${BENCH_REPEAT:-1}"
MEMORY="${PADDLE_HF_MEMORY:-512M}"
BASELINE="${BENCH_BASELINE:-}"
GEN_ARGS="${HF_BENCH_GEN_ARGS:-}"
# Anonymous memory the budget does not cover: code, libc, tensor tables, pickle trees.
RSS_ALLOWANCE_MB=64
TIME=/usr/bin/time
PYREF="$REPO/tests/bench/paddle_hf_python.py"
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"


[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
"$CKPTCONV" hf2paddle --help >/dev/null 2>&1 \
    || die "$CKPTCONV has no working 'hf2paddle' command: build a newer ckptconv"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"${PADDLE_PYTHON:-false}" -c 'import paddle, paddlenlp, safetensors.paddle' >/dev/null 2>&1 \
    || die "PADDLE_PYTHON=${PADDLE_PYTHON:-(unset)}: set it to a Python with paddlepaddle, paddlenlp and safetensors"
"$VENV_PYTHON" -c 'import numpy' 2>/dev/null || die "numpy does not import in $VENV_PYTHON"
"$TORCH_PYTHON" -c 'import numpy' 2>/dev/null || die "numpy does not import in $TORCH_PYTHON"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline

MEMORY_BYTES=$(size_bytes "$MEMORY") || die "PADDLE_HF_MEMORY=$MEMORY: expected a size such as 512M or 2G"

mkdir -p "$BENCH_DIR"
IN="$BENCH_DIR/hf_llama"
hf_bench_input "$IN" "$GEN_ARGS"
SIZE=$(du -sb "$IN" | cut -f1)

OUT="$BENCH_DIR/paddle_hf_out"
rm -rf "$OUT"
# Alive at once: both PaddleNLP checkpoints of 1 (PaddleNLP's is the input of 2), then both
# Hugging Face outputs of 2.
need_free_disk 4
mkdir -p "$OUT"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$OUT"' EXIT

choose_cache

declare -A CHECK
failed=0

# direction D NAME SRC: cp, cp+sync, ckptconv NAME and the reference for one direction; outputs
# in $OUT/D_ck and $OUT/D_ref.
direction() {
    local d="$1" name="$2" src="$3"
    echo "bench: $d: cp -r, cp -r + sync, ckptconv $name, paddle_hf_python.py $name"
    measure "cp:$d" "$OUT/cp" cp -r "$src" "$OUT/cp"
    rm -rf "$OUT/cp"
    # ckptconv fsyncs its outputs before renaming them into place; cp does not.
    # shellcheck disable=SC2016
    measure "cp+sync:$d" "$OUT/cp" sh -c 'cp -r "$1" "$2" && sync -f "$2"' sh "$src" "$OUT/cp"
    rm -rf "$OUT/cp"
    measure_ckptconv ":$d" "$OUT/${d}_ck" "$name" "$src" "$OUT/${d}_ck" --memory "$MEMORY" -q
    measure "ref:$d" "$OUT/${d}_ref" "$PADDLE_PYTHON" -W ignore "$PYREF" "$name" "$src" "$OUT/${d}_ref"
}

direction 1 hf2paddle "$IN"
echo "bench: 1: comparing ckptconv's output with PaddleNLP's"
hf_compare 1 paddle "$OUT/1_ck" "$OUT/1_ref"
[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$OUT/1_ck"
direction 2 paddle2hf "$OUT/1_ref"
echo "bench: 2: comparing ckptconv's output with the Python reference's, and with the input"
hf_compare 2 hf "$OUT/2_ck" "$OUT/2_ref"
hf_compare rt hf "$IN" "$OUT/2_ck"


echo
echo "hf2paddle / paddle2hf benchmark: Hugging Face LLaMA-shaped model," \
     "$(awk -v s="$SIZE" 'BEGIN { printf "%.2f GB", s / 1e9 }') of bf16 safetensors, single card," \
     "$(nproc) cores, $CACHE"
echo "ckptconv: $CKPTCONV hf2paddle|paddle2hf IN OUT --memory $MEMORY -q"
echo "ref: $("$PADDLE_PYTHON" -c 'import paddle, paddlenlp; print(f"PaddleNLP {paddlenlp.__version__}, paddle {paddle.__version__}")' 2>/dev/null | tail -1)," \
     "tests/bench/paddle_hf_python.py hf2paddle|paddle2hf IN OUT"
[ -z "$BASELINE" ] || echo "baseline: $BASELINE, the same arguments"
for d in 1 2; do
    case $d in
        1) title="hf2paddle: Hugging Face -> PaddleNLP (ref: from_pretrained(convert_from_torch=True) + save_pretrained)" ;;
        2) title="paddle2hf: PaddleNLP (PaddleNLP's output of 1) -> Hugging Face (ref: paddle.load + transpose + safetensors)" ;;
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
