#!/usr/bin/env bash
# HDF5 / zstd benchmark: a 2 GB bfloat16 checkpoint (torch.save, LLaMA-shaped, N(0, 0.02)
# weights) converted by ckptconv to .h5 with zstd level 3 and to .safetensors.zst (level 3),
# next to a plain .safetensors convert and `zstd -T0 -3` (also with --long=27, as ckptconv's
# .zst output from 128 MiB on) of that plain file (the same bytes);
# then read back: ckptconv convert of the .h5 and of the .safetensors.zst to plain
# .safetensors, next to `zstd -d -T0`. Both read-backs must equal the plain .safetensors
# byte for byte, and `zstd -d` of ckptconv's .safetensors.zst too; a mismatch fails the run.
#
#   tests/bench/hdf5_zstd.sh [CKPTCONV]      (default: build/ckptconv)
#
# The input is generated once with Debian's torch (tests/bench/make_bf16_big.py) and cached
# in .bench/ (ignored by git); the outputs need about 8 GB more while running. Each run under
# GNU time (wall seconds, peak RSS), page cache dropped before each run when possible (root;
# BENCH_CACHE=warm keeps it). Per tool: wall s, peak RSS MB (GNU time; for ckptconv also the
# sampled peaks of anonymous and file-backed memory, tests/bench/lib.sh), the compressed size
# (output when writing, input when reading), compression ratio (plain .safetensors bytes /
# compressed bytes), throughput in MB/s of uncompressed data (the plain .safetensors size over
# the wall time, so rows compare), and wall time over zstd's (zstd -T0 -3 / zstd -d -T0).
# BENCH_REPEAT=N keeps the fastest of N runs per tool; BENCH_BASELINE=EXE measures another
# ckptconv (an older build) the same way, each of its runs just before one of ckptconv's.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_DIR="$REPO/.bench"
CKPTCONV="${1:-${CKPTCONV:-$REPO/build/ckptconv}}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
REPEAT="${BENCH_REPEAT:-1}"
BASELINE="${BENCH_BASELINE:-}"
LEVEL=3
TIME=/usr/bin/time
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"

[ -x "$CKPTCONV" ] || die "no ckptconv binary at $CKPTCONV (build first, or pass its path)"
[ -x "$TIME" ] || die "GNU time is missing at $TIME: run scripts/install-deps.sh"
command -v zstd >/dev/null || die "zstd is not installed: run scripts/install-deps.sh"
"$TORCH_PYTHON" -c 'import torch' 2>/dev/null || die "torch does not import in $TORCH_PYTHON"
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT=$REPEAT: expected a positive integer"
check_baseline

mkdir -p "$BENCH_DIR"
BIG="$BENCH_DIR/big_bf16.pt"
STAMP="$BENCH_DIR/big_bf16.pt.done"
GEN_ID="$(sha256sum "$REPO/tests/bench/make_bf16_big.py" | cut -c1-16)"
if [ ! -f "$BIG" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$GEN_ID" ]; then
    echo "bench: generating $BIG (once)"
    rm -f "$BIG" "$STAMP"
    "$TORCH_PYTHON" "$REPO/tests/bench/make_bf16_big.py" "$BIG"
    echo "$GEN_ID" >"$STAMP"
fi

OUT="$BENCH_DIR/out-hdf5"
rm -rf "$OUT"
mkdir -p "$OUT"
trap 'rm -rf "$OUT"' EXIT
choose_cache

PLAIN="$OUT/big.safetensors"
H5="$OUT/big.h5"
STZ="$OUT/big.safetensors.zst"
ZCLI="$OUT/big.zstd-cli.safetensors.zst"
BACK="$OUT/back.safetensors"
declare -A SIZE

# --- writing --------------------------------------------------------------------------------
measure_ckptconv "-plain" "$PLAIN" convert -q "$BIG" "$PLAIN"
SIZE[ckptconv-plain]=$(stat -c %s "$PLAIN")
measure_ckptconv "-h5" "$H5" convert -q --compress "zstd:$LEVEL" "$BIG" "$H5"
SIZE[ckptconv-h5]=$(stat -c %s "$H5")
measure_ckptconv "-stzst" "$STZ" convert -q --compress-level "$LEVEL" "$BIG" "$STZ"
SIZE[ckptconv-stzst]=$(stat -c %s "$STZ")
measure "zstd" "$ZCLI" zstd -q -T0 "-$LEVEL" "$PLAIN" -o "$ZCLI"
SIZE[zstd]=$(stat -c %s "$ZCLI")
# what ckptconv's .zst output does from 128 MiB on: long-distance matching, 2^27 window
measure "zstd-long" "$ZCLI.long" zstd -q -T0 "-$LEVEL" --long=27 "$PLAIN" -o "$ZCLI.long"
SIZE[zstd-long]=$(stat -c %s "$ZCLI.long")
rm -f "$ZCLI.long"

# ckptconv's .safetensors.zst is the plain file compressed
zstd -q -d -c "$STZ" | cmp - "$PLAIN" || die "zstd -d of ckptconv's .safetensors.zst differs from its .safetensors"

# --- reading --------------------------------------------------------------------------------
measure_ckptconv "-read-h5" "$BACK" convert -q "$H5" "$BACK"
cmp "$BACK" "$PLAIN" || die ".h5 -> .safetensors differs from the direct .safetensors"
SIZE[ckptconv-read-h5]=$(stat -c %s "$H5")
measure_ckptconv "-read-stzst" "$BACK" convert -q "$STZ" "$BACK"
cmp "$BACK" "$PLAIN" || die ".safetensors.zst -> .safetensors differs from the direct .safetensors"
SIZE[ckptconv-read-stzst]=$(stat -c %s "$STZ")
measure "zstd-d" "$BACK" zstd -q -d -T0 "$ZCLI" -o "$BACK"
cmp "$BACK" "$PLAIN" || die "zstd -d gave another file"
SIZE[zstd-d]=$(stat -c %s "$ZCLI")
for t in plain h5 stzst read-h5 read-stzst; do
    [ -z "$BASELINE" ] || SIZE[baseline-$t]=${SIZE[ckptconv-$t]}
done

# --- report ---------------------------------------------------------------------------------
RAW=${SIZE[ckptconv-plain]}
INSIZE=$(stat -c %s "$BIG")
echo
echo "hdf5/zstd benchmark: $(awk -v s="$INSIZE" 'BEGIN { printf "%.2f GB", s / 1e9 }') bfloat16 torch .pt" \
     "($(awk -v s="$RAW" 'BEGIN { printf "%.2f GB", s / 1e9 }') as plain .safetensors), zstd level $LEVEL," \
     "$(nproc) cores, $CACHE, fastest of $REPEAT"
echo "ckptconv: $CKPTCONV${BASELINE:+; baseline: $BASELINE}; zstd: $(zstd -V | head -n 1)"
row_header() {
    printf '%-40s %8s %12s %9s %9s %13s %7s %9s %12s\n' "$1" "wall s" "peak RSS MB" "anon MB" "file MB" \
        "compressed MB" ratio "MB/s" "wall / zstd"
}
row() {
    local name="$1" label="$2" ref="$3"
    printf '%-40s %8.2f %12s %9s %9s %13.1f %7.3f %9.1f %12s\n' "$label" "${WALL[$name]}" "$(mb "${RSS[$name]}")" \
        "$(mb "${ANON[$name]:-}")" "$(mb "${FILEB[$name]:-}")" \
        "$(awk -v s="${SIZE[$name]}" 'BEGIN { print s / 1e6 }')" \
        "$(awk -v r="$RAW" -v s="${SIZE[$name]}" 'BEGIN { print (s > 0 ? r / s : 0) }')" \
        "$(awk -v r="$RAW" -v w="${WALL[$name]}" 'BEGIN { print (w > 0 ? r / 1e6 / w : 0) }')" \
        "$(ratio "${WALL[$name]}" "${WALL[$ref]}")"
}
echo
row_header "write (from the .pt)"
for t in h5 stzst plain; do
    for who in $(with_baseline baseline ckptconv); do
        case $t in
            h5) label="$who -> .h5 --compress zstd:$LEVEL" ;;
            stzst) label="$who -> .safetensors.zst (level $LEVEL)" ;;
            plain) label="$who -> .safetensors" ;;
        esac
        row "$who-$t" "$label" zstd
    done
done
row zstd "zstd -T0 -$LEVEL of the .safetensors" zstd
row zstd-long "zstd -T0 -$LEVEL --long=27 of it" zstd
echo
row_header "read (to plain .safetensors)"
for t in read-h5 read-stzst; do
    for who in $(with_baseline baseline ckptconv); do
        case $t in
            read-h5) label="$who .h5 -> .safetensors" ;;
            read-stzst) label="$who .safetensors.zst -> .safetensors" ;;
        esac
        row "$who-$t" "$label" zstd-d
    done
done
row zstd-d "zstd -d -T0" zstd-d
echo
echo "ckptconv / zstd wall time: .h5 zstd:$LEVEL $(ratio "${WALL[ckptconv-h5]}" "${WALL[zstd]}")x," \
     ".safetensors.zst $(ratio "${WALL[ckptconv-stzst]}" "${WALL[zstd]}")x (zstd alone, not counting" \
     "the .safetensors it reads: convert + zstd = $(awk -v a="${WALL[ckptconv-plain]}" -v b="${WALL[zstd]}" 'BEGIN { printf "%.2f", a + b }') s);" \
     "reading: .h5 $(ratio "${WALL[ckptconv-read-h5]}" "${WALL[zstd-d]}")x," \
     ".safetensors.zst $(ratio "${WALL[ckptconv-read-stzst]}" "${WALL[zstd-d]}")x"
echo "compressed MB: the output when writing, the input when reading; ratio: plain .safetensors bytes ($RAW) /"\
     "compressed bytes; MB/s: plain .safetensors bytes per wall second; anon / file MB: sampled peaks of"\
     "RssAnon / RssFile (ckptconv only)"
