#!/usr/bin/env bash
# ZeRO consolidation benchmark: `ckptconv zero-to-fp32` against DeepSpeed's own zero_to_fp32.py
# and against `cp` of the optimizer-state files, on a synthetic ZeRO-2 and ZeRO-3 checkpoint
# (world size 4, 2.95 GB of fp32 master weights each, plus two Adam moments).
#
#   DS_PYTHON=VENV/bin/python tests/bench/zero_to_fp32.sh [CKPTCONV]   (default: build/ckptconv)
#
# DS_PYTHON must be a python with torch >= 2.2 and deepspeed: it writes the inputs and runs
# DeepSpeed's converter. The environment lives outside the repository and is not needed by
# the test suite; the versions of testdata/gen/README_zero.md (those that wrote the template
# fixtures) are:
#   python3 -m venv VENV
#   VENV/bin/pip install "torch==2.10.0" "deepspeed==0.19.8" safetensors huggingface_hub numpy
#
# Inputs: tests/bench/make_zero_bench.py loads real checkpoints written by DeepSpeed 0.19.8
# (testdata/zero/stage2_fp32_ws2, stage3_fp32_ws4) and saves them again with torch.save for
# a LLaMA-7B-wide model of 3 layers (tied lm_head, a persistent buffer, two param groups) at
# world size 4, with the flat partitions laid out by DeepSpeed's rules; see its docstring.
# Before the first generation it checks itself (`make_zero_bench.py selftest`: the layout
# rules reproduce every committed fixture, and DeepSpeed's zero_to_fp32 reads tiny
# checkpoints made the same way back to the generated values). The inputs (about 12 GB for
# ZeRO-2, 9 GB for ZeRO-3) are cached in .bench/zero/ (ignored by git) and regenerated when
# the generator or the templates change; outputs and copies need about 15 GB more while
# running.
#
# Per stage, each run cold (page cache dropped before each when /proc/sys/vm/drop_caches is
# writable, i.e. as root) under GNU time: cp of the optim-state files, the same followed by
# sync (ckptconv syncs its output, cp and DeepSpeed do not), DeepSpeed's zero_to_fp32.py with
# its default options (pytorch_model.bin, 5GB shards; run as the copy save_checkpoint places
# next to `latest`), and `ckptconv zero-to-fp32` (or, while that command does not exist,
# `ckptconv convert DIR OUT/pytorch_model.bin --dtype float32`, which writes the same file).
# Then both outputs must hold identical tensors (names, order, dtypes, shapes, bytes,
# aliases) and DeepSpeed's must equal the generated values; a mismatch fails the run.
# While ckptconv runs, /proc/PID/status is sampled every 50 ms for its anonymous (RssAnon)
# and file-backed (RssFile: mapped input pages) resident memory (tests/bench/lib.sh).
# Targets: ckptconv >= 5x faster than DeepSpeed, <= 1/4 of its peak RSS, within 2x of cp.
# BENCH_REPEAT=N keeps the fastest of N runs per tool; BENCH_STAGES="2 3" picks stages;
# BENCH_STRICT=1 exits 1 when a target is missed; BENCH_CACHE=warm keeps the page cache;
# BENCH_BASELINE=EXE measures another ckptconv (an older build) the same way, each of its
# runs just before one of ckptconv's.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench/zero"
GEN="$REPO/tests/bench/make_zero_bench.py"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
REPEAT="${BENCH_REPEAT:-1}"
STAGES="${BENCH_STAGES:-2 3}"
BASELINE="${BENCH_BASELINE:-}"
TIME=/usr/bin/time
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"
export DS_ACCELERATOR=cpu


[ -n "${DS_PYTHON:-}" ] || die "DS_PYTHON is not set: point it at a python with torch >= 2.2 and deepspeed (the header of this script says how to make one)"
[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$DS_PYTHON" -c 'import sys, torch, deepspeed
sys.exit(tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 2))' >/dev/null 2>&1 \
    || die "torch >= 2.2 and deepspeed do not import in DS_PYTHON=$DS_PYTHON"
for s in $STAGES; do
    case "$s" in 2 | 3) ;; *) die "BENCH_STAGES: stage $s is not 2 or 3" ;; esac
done
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline

if "$CKPTCONV" zero-to-fp32 --help >/dev/null 2>&1; then
    CK_MODE=zero-to-fp32
    CK_DESC="ckptconv zero-to-fp32 DIR OUT"
else
    CK_MODE=convert
    CK_DESC="ckptconv convert DIR OUT/pytorch_model.bin --dtype float32 (no zero-to-fp32 command yet)"
fi

# py ARGS...: DS_PYTHON without DeepSpeed's log lines; keeps its exit status.
py() {
    local log rc=0
    log=$(mktemp)
    "$DS_PYTHON" "$@" >"$log" 2>&1 || rc=$?
    grep -v -e '^\[20' -e 'WARNING' "$log" || true
    rm -f "$log"
    return $rc
}

free_gb() { df -P -B1G "$1" | awk 'NR == 2 { print $4 }'; }

mkdir -p "$BENCH_DIR"
GEN_ID="$(cat "$GEN" "$REPO"/testdata/zero/stage2_fp32_ws2/global_step3/* \
    "$REPO"/testdata/zero/stage3_fp32_ws4/global_step3/* | sha256sum | cut -c1-16)"
selftest_done=0
for s in $STAGES; do
    ckpt="$BENCH_DIR/stage$s"
    stamp="$BENCH_DIR/stage$s.done"
    if [ -d "$ckpt" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$GEN_ID" ]; then
        continue
    fi
    rm -rf "$ckpt" "$ckpt.tmp" "$stamp"
    [ "$(free_gb "$BENCH_DIR")" -ge 30 ] || die "less than 30 GB free under $BENCH_DIR for the stage-$s input and the runs"
    if [ "$selftest_done" = 0 ]; then
        echo "bench: checking the generator against DeepSpeed"
        py "$GEN" selftest || die "generator selftest failed"
        selftest_done=1
    fi
    echo "bench: generating the ZeRO-$s input in $ckpt (once)"
    py "$GEN" make --stage "$s" --out "$ckpt.tmp" || die "generating the ZeRO-$s input failed"
    mv "$ckpt.tmp" "$ckpt"
    echo "$GEN_ID" >"$stamp"
done

OUT="$BENCH_DIR/out"
rm -rf "$OUT"
mkdir -p "$OUT"
trap 'rm -rf "$OUT"' EXIT

choose_cache

bytes_in() { du -sb "$1" | cut -f1; }

REPORT=""
for s in $STAGES; do
    ckpt="$BENCH_DIR/stage$s"
    tag_dir="$ckpt/$(cat "$ckpt/latest")"
    optim=("$tag_dir"/*_optim_states.pt)
    optim_bytes=$(stat -c %s "${optim[@]}" | awk '{ s += $1 } END { print s }')
    model_bytes=$(stat -c %s "$tag_dir"/*_model_states.pt | awk '{ s += $1 } END { print s }')
    echo "bench: ZeRO-$s: cp, cp+sync, DeepSpeed zero_to_fp32.py, ckptconv"

    measure "cp:$s" "$OUT/cp/" cp -r "${optim[@]}" "$OUT/cp/"
    measure "cp+sync:$s" "$OUT/cp/" sh -c 'd=$1; shift; cp -r "$@" "$d" && cd "$d" && sync ./*' sh \
        "$OUT/cp" "${optim[@]}"
    rm -rf "$OUT/cp"
    measure "deepspeed:$s" "$OUT/ds/" "$DS_PYTHON" "$ckpt/zero_to_fp32.py" "$ckpt" "$OUT/ds"
    if [ "$CK_MODE" = zero-to-fp32 ]; then
        measure_ckptconv ":$s" "$OUT/ck/" zero-to-fp32 "$ckpt" "$OUT/ck"
    else
        measure_ckptconv ":$s" "$OUT/ck/" convert -q "$ckpt" "$OUT/ck/pytorch_model.bin" --dtype float32
    fi
    out_bytes=$(bytes_in "$OUT/ck")

    echo "bench: ZeRO-$s: comparing the outputs"
    same=$(py "$GEN" compare "$OUT/ds" "$OUT/ck") \
        || { echo "$same" >&2; die "ZeRO-$s: ckptconv's output differs from DeepSpeed's"; }
    values=$(py "$GEN" check-values "$OUT/ds") \
        || { echo "$values" >&2; die "ZeRO-$s: DeepSpeed's output differs from the generated values"; }
    rm -rf "$OUT/ds" "$OUT/ck"

    table=$(
        echo
        echo "ZeRO-$s, world size 4: optim files $(awk -v b="$optim_bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }')," \
            "model-state files $(awk -v b="$model_bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }')," \
            "output $(awk -v b="$out_bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }'); $(nproc) cores, $CACHE"
        printf '%-12s %9s %13s %9s %9s %11s %10s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "GB written" \
            "GB/s"
        for t in $(with_baseline cp cp+sync deepspeed baseline ckptconv); do
            case $t in cp | cp+sync) b=$optim_bytes ;; *) b=$out_bytes ;; esac
            printf '%-12s %9.2f %13s %9s %9s %11s %10s\n' "$t" "${WALL[$t:$s]}" "$(mb "${RSS[$t:$s]}")" \
                "$(mb "${ANON[$t:$s]}")" "$(mb "${FILEB[$t:$s]}")" "$(awk -v b="$b" 'BEGIN { printf "%.2f", b / 1e9 }')" \
                "$(awk -v w="${WALL[$t:$s]}" -v b="$b" 'BEGIN { printf "%.2f", (w > 0 ? b / 1e9 / w : 0) }')"
        done
        report_baseline ":$s"
        echo "check: $same"
        echo "check: DeepSpeed's $values" | sed "s|$OUT/ds: ||"
        check_target "DeepSpeed / ckptconv wall time $(ratio "${WALL[deepspeed:$s]}" "${WALL[ckptconv:$s]}")x (>= 5x)" \
            "$(awk -v a="${WALL[deepspeed:$s]}" -v b="${WALL[ckptconv:$s]}" 'BEGIN { print (a >= 5 * b) ? 1 : 0 }')"
        check_target "ckptconv / DeepSpeed peak RSS $(ratio "${RSS[ckptconv:$s]}" "${RSS[deepspeed:$s]}") (<= 0.25)" \
            "$(awk -v a="${RSS[ckptconv:$s]}" -v b="${RSS[deepspeed:$s]}" 'BEGIN { print (4 * a <= b) ? 1 : 0 }')"
        check_target "ckptconv / cp wall time $(ratio "${WALL[ckptconv:$s]}" "${WALL[cp:$s]}")x (<= 2x; / cp+sync: $(ratio "${WALL[ckptconv:$s]}" "${WALL[cp+sync:$s]}")x)" \
            "$(awk -v a="${WALL[ckptconv:$s]}" -v b="${WALL[cp:$s]}" 'BEGIN { print (a <= 2 * b) ? 1 : 0 }')"
    )
    case "$table" in *"target MISSED"*) missed=1 ;; esac
    REPORT+="$table"$'\n'
done

echo
echo "zero_to_fp32 benchmark: $CK_DESC vs DeepSpeed $("$DS_PYTHON" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -n 1)"
echo "$REPORT"
if [ "$missed" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
