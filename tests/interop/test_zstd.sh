#!/usr/bin/env bash
# Transparent zstd, against the real zstd CLI:
#  - an output named X.zst is X compressed: `zstd -d` of it gives, byte for byte, what the same
#    convert writes to X (.safetensors, .pt, .h5), at the default level and with
#    --compress-level; torch.load / safetensors / h5py load the decompressed files and find
#    the source's tensors;
#  - an input named X.zst, compressed by the zstd CLI (default level, -19, --long=31 -T0,
#    --no-check, streamed through a pipe so that the frame has no content size), reads as X:
#    converting it gives the same bytes as converting X; and the 1 GiB paddle fixture
#    split_big.pdparams.zst (a 1 GiB window) reads without being decompressed first;
#  - a truncated or corrupt .zst input is an error that names the file and leaves no output.
# (Several frames concatenated with cat are not one zstd file; they are not tried.)
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "h5py, hdf5plugin, safetensors, torch"
need_program zstd

h5_py() { "$VENV_PYTHON" "$INTEROP_DIR/h5_check.py" "$@"; }
SRC="$TESTDATA/sample/tiny_llama.pt"
OUT="$WORK/out"
mkdir -p "$OUT"

# zst_output EXT [OPTIONS...]: convert SRC to D/out.EXT and to Z/out.EXT.zst (the same base
# name: torch.save files record it), then compare.
zst_output() {
    local ext="$1" tag
    shift
    tag="$ext${1:+-$(echo "$*" | tr -c 'a-z0-9' '_')}"
    mkdir -p "$OUT/$tag/plain" "$OUT/$tag/zst" "$OUT/$tag/unz"
    ckpt convert -q "$@" "$SRC" "$OUT/$tag/plain/out.$ext"
    ckpt convert -q "$@" "$SRC" "$OUT/$tag/zst/out.$ext.zst"
    zstd -q -t "$OUT/$tag/zst/out.$ext.zst"
    zstd -q -d "$OUT/$tag/zst/out.$ext.zst" -o "$OUT/$tag/unz/out.$ext"
    cmp "$OUT/$tag/plain/out.$ext" "$OUT/$tag/unz/out.$ext"
    queue h5 "tiny_llama.pt -> .$ext.zst $*: the decompressed file loads" loads "$OUT/$tag/unz/out.$ext"
    queue h5 "tiny_llama.pt -> .$ext.zst $*: the decompressed file holds the source's tensors" \
        same "$SRC" "$OUT/$tag/unz/out.$ext"
}

for ext in safetensors pt h5; do
    case_run "convert tiny_llama.pt -> .$ext.zst: zstd -d gives the .$ext output" zst_output "$ext"
done
case_run "convert tiny_llama.pt -> .safetensors.zst --compress-level 19" zst_output safetensors --compress-level 19
case_run "convert tiny_llama.pt -> .pt.zst --compress-level 1" zst_output pt --compress-level 1
case_run "convert tiny_llama.pt -> .h5.zst --compress zstd:3" zst_output h5 --compress zstd:3

# Inputs of every readable kind, plain.
ST_IN="$WORK/tiny_llama.safetensors"
"$CKPTCONV" convert -q "$SRC" "$ST_IN" || die "cannot make a .safetensors input"
INPUTS=("$SRC" "$ST_IN" "$TESTDATA/hdf5/chunked_zstd.h5" "$TESTDATA/hdf5/plain.h5" "$TESTDATA/paddle/fp32.pdparams")

# zst_input INPUT VARIANT: INPUT compressed by the zstd CLI converts like INPUT itself.
zst_input() {
    local src="$1" variant="$2" base dir
    base=$(basename "$src")
    dir="$WORK/in-$variant"
    mkdir -p "$dir"
    case $variant in
        default) zstd -q "$src" -o "$dir/$base.zst" ;;
        level19) zstd -q -19 "$src" -o "$dir/$base.zst" ;;
        long31) zstd -q --long=31 -T0 "$src" -o "$dir/$base.zst" ;;
        nocheck) zstd -q --no-check "$src" -o "$dir/$base.zst" ;;
        stream) zstd -q -c <"$src" >"$dir/$base.zst" ;;
    esac
    ckpt convert -q "$src" "$dir/$base.ref.safetensors"
    ckpt convert -q "$dir/$base.zst" "$dir/$base.safetensors"
    cmp "$dir/$base.ref.safetensors" "$dir/$base.safetensors"
}

for src in "${INPUTS[@]}"; do
    for variant in default level19 long31 nocheck stream; do
        case_run "$(basename "$src").zst ($variant) converts as $(basename "$src")" zst_input "$src" "$variant"
    done
done

# A real 1 GiB window (zstd --long=31 of a 1 GiB file), read directly.
split_big() {
    local raw="$WORK/split_big.pdparams"
    zstd -q -d --long=31 "$TESTDATA/paddle/split_big.pdparams.zst" -o "$raw"
    ckpt convert -q "$raw" "$WORK/split_big.ref.safetensors"
    rm -f "$raw"
    ckpt convert -q "$TESTDATA/paddle/split_big.pdparams.zst" "$WORK/split_big.safetensors"
    cmp "$WORK/split_big.ref.safetensors" "$WORK/split_big.safetensors"
    rm -f "$WORK/split_big.ref.safetensors" "$WORK/split_big.safetensors"
}
case_run "split_big.pdparams.zst (1 GiB window) converts as its decompressed file" split_big

# Damaged inputs: an error naming the file, nothing written.
damaged() {
    local kind="$1" dir="$WORK/bad-$1" z="$WORK/bad-$1.pt.zst"
    mkdir -p "$dir"
    zstd -q -c <"$SRC" >"$WORK/whole.zst"
    case $kind in
        truncated) head -c "$(($(stat -c %s "$WORK/whole.zst") / 2))" "$WORK/whole.zst" >"$z" ;;
        corrupt)
            cp "$WORK/whole.zst" "$z"
            printf '\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$z" bs=1 seek=200 conv=notrunc status=none ;;
    esac
    expect_refusal "$dir" "$dir.log" "bad-$kind.pt.zst" -- "$CKPTCONV" convert "$z" "$dir/out.safetensors"
}
case_run "a truncated .pt.zst is refused, naming it" damaged truncated
case_run "a corrupt .pt.zst is refused, naming it" damaged corrupt

run_batch h5
finish
