#!/usr/bin/env bash
# HDF5 in and out, checked with the real h5py + hdf5plugin (h5_check.py):
#  (a) every fixture h5py wrote (testdata/hdf5: every numeric type, nested groups, scalar,
#      zero-size, big-endian, compact, user block, unallocated, gzip/shuffle/fletcher32 and
#      hdf5plugin zstd chunks, bfloat16/float8 by the "dtype" attribute, Keras names) converts
#      to safetensors with exactly the tensors of expected/NAME.safetensors, bit for bit;
#  (b) .pt -> .h5 with --compress zstd, zstd:9, gzip, gzip:1, none: h5py reads every dataset,
#      each carries the filter (32015 / deflate, with the level), and equals the source tensor
#      (bfloat16 through the "dtype" attribute); converting twice gives the same bytes;
#  (c) .pt -> .h5 -> .pt gives back every tensor byte for byte, names in the source's order;
#  (d) zero-to-fp32 --to h5 equals zero-to-fp32 to safetensors (to .bin where tied weights
#      keep safetensors out), tensor by tensor, on every ZeRO fixture in testdata/zero.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "h5py, hdf5plugin, safetensors, torch"
"$VENV_PYTHON" -c 'import h5py, hdf5plugin, sys; sys.exit(0 if h5py.h5z.filter_avail(32015) else 1)' \
    || die "hdf5plugin's zstd filter (32015) is not available in $VENV_PYTHON: run scripts/install-deps.sh"

H5DATA="$TESTDATA/hdf5"
[ -d "$H5DATA/expected" ] || die "no HDF5 fixtures under $H5DATA (testdata/gen/gen_hdf5.py writes them)"

h5_py() { "$VENV_PYTHON" "$INTEROP_DIR/h5_check.py" "$@"; }
h5t_py() { "$TORCH_PYTHON" "$INTEROP_DIR/h5_check.py" "$@"; }

# (a) fixture -> safetensors
fixture_to_st() {
    local src="$1" name out
    name=$(basename "$src" .h5)
    out="$WORK/a-$name.safetensors"
    ckpt convert -q "$src" "$out"
    queue h5 "hdf5/$name.h5 -> safetensors: the tensors of expected/$name.safetensors" \
        same "$H5DATA/expected/$name.safetensors" "$out"
}

n=0
for src in "$H5DATA"/*.h5; do
    n=$((n + 1))
    case_run "inspect hdf5/$(basename "$src")" ckpt inspect "$src"
    case_run "convert hdf5/$(basename "$src") -> safetensors" fixture_to_st "$src"
done
[ "$n" -ge 10 ] || die "only $n HDF5 fixtures under $H5DATA"

# (b) .pt -> .h5 under each compression, read back by h5py
DTYPES_NC="$WORK/dtypes_nc.pt"
"$TORCH_PYTHON" "$INTEROP_DIR/torch_check.py" without "$TESTDATA/torch/dtypes.pt" "$DTYPES_NC" complex64 complex128
SOURCES=("$TESTDATA/sample/tiny_llama.pt" "$TESTDATA/torch2/state_dict.pt" "$DTYPES_NC")

to_h5() {
    local src="$1" comp="$2" name out kind level=""
    name=$(basename "$src" .pt)
    out="$WORK/b-$name-${comp/:/_}.h5"
    ckpt convert -q --compress "$comp" "$src" "$out"
    ckpt convert -q --compress "$comp" "$src" "$WORK/b-again.h5"
    cmp "$out" "$WORK/b-again.h5" || { echo "converting twice gave different files"; return 1; }
    rm -f "$WORK/b-again.h5"
    kind=${comp%%:*}
    [ "$kind" = "$comp" ] || level=${comp#*:}
    queue h5 "$name.pt -> .h5 --compress $comp: h5py sees the filter on every dataset" filters "$out" "$kind" ${level:+"$level"}
    queue h5 "$name.pt -> .h5 --compress $comp: h5py reads the source's tensors" same "$src" "$out"
}

for src in "${SOURCES[@]}"; do
    for comp in zstd zstd:9 gzip gzip:1 none; do
        case_run "convert $(basename "$src") -> .h5 --compress $comp (twice, same bytes)" to_h5 "$src" "$comp"
    done
done

# (c) .pt -> .h5 -> .pt
round_trip() {
    local src="$1" comp="$2" name
    name=$(basename "$src" .pt)
    ckpt convert -q --compress "$comp" "$src" "$WORK/c-$name-$comp.h5"
    ckpt convert -q "$WORK/c-$name-$comp.h5" "$WORK/c-$name-$comp.pt"
    queue h5t "$name.pt -> .h5 ($comp) -> .pt: every tensor byte for byte, names in order" \
        ordered "$src" "$WORK/c-$name-$comp.pt"
}

for src in "${SOURCES[@]}"; do
    for comp in zstd none; do
        case_run "round trip $(basename "$src") -> .h5 ($comp) -> .pt" round_trip "$src" "$comp"
    done
done

# (d) zero-to-fp32 --to h5 against --to safetensors; where safetensors refuses the tied
# weights, against the default .bin output (HDF5 may store every name, or refuse the same
# way); where zero-to-fp32 refuses the checkpoint altogether, --to h5 must refuse it too.
zero_h5() {
    local dir="$1" name out ref
    name=$(basename "$dir")
    out="$WORK/d-$name"
    mkdir -p "$out"
    if ! "$CKPTCONV" zero-to-fp32 -q "$dir" "$out/bin" 2>"$out/bin.err"; then
        if "$CKPTCONV" zero-to-fp32 -q "$dir" "$out/h5" --to h5 2>"$out/h5.err"; then
            echo "the default output is refused ($(head -n 1 "$out/bin.err")), but --to h5 succeeded"
            return 1
        fi
        echo "refused with and without --to h5: $(head -n 1 "$out/h5.err")"
        return 0
    fi
    if "$CKPTCONV" zero-to-fp32 -q "$dir" "$out/st" --to safetensors 2>"$out/st.err"; then
        ref="$out/st"
    else
        grep -q "tied" "$out/st.err" || { cat "$out/st.err"; echo "--to safetensors failed"; return 1; }
        ref="$out/bin"
    fi
    if "$CKPTCONV" zero-to-fp32 -q "$dir" "$out/h5" --to h5 2>"$out/h5.err"; then
        queue h5 "zero/$name: --to h5 equals --to ${ref##*/}" same_dir "$out/h5" "$ref"
    else
        cat "$out/h5.err"
        if [ "$ref" != "$out/bin" ] || ! grep -q "tied" "$out/h5.err"; then
            echo "--to h5 failed"
            return 1
        fi
        [ ! -e "$out/h5" ] || [ -z "$(ls -A "$out/h5")" ] || { echo "a refused run left files"; return 1; }
        echo "refused for its tied weights, as safetensors is"
    fi
}

n=0
for dir in "$TESTDATA"/zero/*/; do
    dir=${dir%/}
    [ -f "$dir/latest" ] || continue
    n=$((n + 1))
    case_run "zero-to-fp32 zero/$(basename "$dir") --to h5" zero_h5 "$dir"
done
[ "$n" -ge 14 ] || die "only $n DeepSpeed fixtures under $TESTDATA/zero"

run_batch h5
run_batch h5t
finish
