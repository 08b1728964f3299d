#!/usr/bin/env bash
# Convert benchmark: a >= 2 GiB torch.save checkpoint -> safetensors, timed against `cp` of
# the same file and against the Python way (torch.load + safetensors.torch.save_file).
#
#   tests/bench/convert.sh [CKPTCONV]      (default: build/ckptconv)
#
# The input is generated once with Debian's torch and cached in .bench/ (ignored by git).
# Each run is measured with GNU time (wall seconds, peak RSS); page cache is dropped before
# each run when /proc/sys/vm/drop_caches is writable (root), otherwise runs are warm-cache
# and the table says so. While ckptconv runs, /proc/PID/status is sampled every 50 ms for
# its anonymous (RssAnon) and file-backed (RssFile: mapped input pages) resident memory
# (tests/bench/lib.sh). Targets: ckptconv wall time within 2x of cp, peak RSS below 10% of
# the file size. BENCH_REPEAT=N runs each tool N times and keeps the fastest;
# BENCH_STRICT=1 exits 1 when a target is missed; BENCH_BASELINE=EXE measures another
# ckptconv (an older build) the same way, each of its runs just before one of ckptconv's.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
VENV_PYTHON="${VENV_PYTHON:-$REPO/.venv/bin/python}"
REPEAT="${BENCH_REPEAT:-1}"
BASELINE="${BENCH_BASELINE:-}"
TIME=/usr/bin/time
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"


[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
"$TORCH_PYTHON" -c 'import torch' 2>/dev/null || die "torch does not import in $TORCH_PYTHON"
"$VENV_PYTHON" -c 'import torch, safetensors' 2>/dev/null \
    || die "torch and safetensors do not import in $VENV_PYTHON: run scripts/install-deps.sh"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline

mkdir -p "$BENCH_DIR"
BIG="$BENCH_DIR/big.pt"
STAMP="$BENCH_DIR/big.pt.done"
GEN_ID="$(sha256sum "$REPO/tests/bench/make_big.py" | cut -c1-16)"
if [ ! -f "$BIG" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$GEN_ID" ]; then
    echo "bench: generating $BIG (once)"
    rm -f "$BIG" "$STAMP"
    "$TORCH_PYTHON" "$REPO/tests/bench/make_big.py" "$BIG"
    echo "$GEN_ID" >"$STAMP"
fi
SIZE=$(stat -c %s "$BIG")

OUT="$BENCH_DIR/out"
rm -rf "$OUT"
mkdir -p "$OUT"
trap 'rm -rf "$OUT"' EXIT

if ( sync && echo 3 >/proc/sys/vm/drop_caches ) 2>/dev/null; then
    CACHE="cold (page cache dropped before each run)"
    drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
else
    CACHE="warm (cannot drop the page cache without root; input read once before)"
    drop_caches() { :; }
    cat "$BIG" >/dev/null
fi

measure cp "$OUT/copy.pt" cp "$BIG" "$OUT/copy.pt"
# ckptconv fsyncs its output before renaming it into place; cp does not. `sync FILE`
# makes the comparison like for like.
measure "cp+sync" "$OUT/copy.pt" sh -c 'cp "$1" "$2" && sync "$2"' sh "$BIG" "$OUT/copy.pt"
rm -f "$OUT/copy.pt"
measure_ckptconv "" "$OUT/big.safetensors" convert -q "$BIG" "$OUT/big.safetensors"
rm -f "$OUT/big.safetensors"
measure "torch+safetensors" "$OUT/big.safetensors" "$VENV_PYTHON" "$REPO/tests/bench/torch_convert.py" "$BIG" \
    "$OUT/big.safetensors"
rm -f "$OUT/big.safetensors"

echo
echo "convert benchmark: $(awk -v s="$SIZE" 'BEGIN { printf "%.2f GiB", s / 2^30 }') torch .pt -> safetensors," \
     "$(nproc) cores, $CACHE"
[ -z "$BASELINE" ] || echo "ckptconv: $CKPTCONV; baseline: $BASELINE (convert -q IN OUT)"
printf '%-20s %8s %12s %9s %9s %16s %15s\n' tool "wall s" "peak RSS MB" "anon MB" "file MB" "wall / ckptconv" \
    "RSS / ckptconv"
for tool in $(with_baseline cp "cp+sync" baseline ckptconv "torch+safetensors"); do
    printf '%-20s %8.2f %12s %9s %9s %16s %15s\n' "$tool" "${WALL[$tool]}" "$(mb "${RSS[$tool]}")" \
        "$(mb "${ANON[$tool]}")" "$(mb "${FILEB[$tool]}")" \
        "$(ratio "${WALL[$tool]}" "${WALL[ckptconv]}")" "$(ratio "${RSS[$tool]}" "${RSS[ckptconv]}")"
done
echo "ckptconv sampled peaks: $(mb "${ANON[ckptconv]}") MB anonymous, $(mb "${FILEB[ckptconv]}") MB file-backed"
report_baseline

check_target "ckptconv wall time within 2x of cp ($(awk -v a="${WALL[ckptconv]}" -v b="${WALL[cp]}" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }'); of cp+sync: $(awk -v a="${WALL[ckptconv]}" -v b="${WALL[cp+sync]}" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }'))" \
    "$(awk -v a="${WALL[ckptconv]}" -v b="${WALL[cp]}" 'BEGIN { print (a <= 2 * b) ? 1 : 0 }')"
check_target "ckptconv peak RSS below 10% of the file ($(awk -v r="${RSS[ckptconv]}" -v s="$SIZE" 'BEGIN { printf "%.1f%%", 100 * r * 1024 / s }'))" \
    "$(awk -v r="${RSS[ckptconv]}" -v s="$SIZE" 'BEGIN { print (r * 1024 < 0.1 * s) ? 1 : 0 }')"
if [ "$missed" = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
