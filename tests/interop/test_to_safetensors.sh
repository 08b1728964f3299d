#!/usr/bin/env bash
# torch and paddle fixtures -> ckptconv convert -> .safetensors, read back by the real
# safetensors package: every source tensor by name, dtype, shape and bytes (views as their
# contiguous values). --dtype casts must equal torch's own Tensor.to bit for bit.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "safetensors, torch, paddle"
need_program zstd

unknown_flags() {
    if [ -n "$(unknown_globals "$1")" ]; then echo --drop-unknown-objects; fi
}

# to_st SRC EXPECTED_JSON [SKIP...]
to_st() {
    local src="$1" exp="$2"
    shift 2
    local out
    out="$WORK/st-$(basename "$src").safetensors"
    # shellcheck disable=SC2046 # zero or one flag
    ckpt convert -q $(unknown_flags "$src") "$src" "$out"
    queue st "$(basename "$src") -> safetensors: tensors match" expected "$out" "$exp" "$@"
}

# safetensors has no complex128: the writer must refuse it by name, not drop it silently.
complex128_refused() {
    local dir="$WORK/st-c128"
    mkdir -p "$dir"
    expect_refusal "$dir" "$dir.err" complex128 -- \
        "$CKPTCONV" convert "$TESTDATA/torch/dtypes.pt" "$dir/out.safetensors"
}

# cast SRC DTYPE
cast() {
    local src="$1" dtype="$2" out
    out="$WORK/cast-$(basename "$src")-$dtype.safetensors"
    # shellcheck disable=SC2046
    ckpt convert -q $(unknown_flags "$src") --dtype "$dtype" "$src" "$out"
    queue st "$(basename "$src") --dtype $dtype: equals torch's .to($dtype)" cast "$out" "$src" "$dtype"
}

# The 1 GiB split fixture is checked on its own so that its files can go right away.
split_big() {
    local raw="$WORK/split_big.pdparams" out="$WORK/split_big.safetensors"
    zstd -q -d --long=31 "$TESTDATA/paddle/split_big.pdparams.zst" -o "$raw"
    ckpt convert -q "$raw" "$out"
    rm -f "$raw"
    st_py expected "$out" "$TESTDATA/paddle/expected/split_big.json"
    rm -f "$out"
}

DTYPES_NC="$WORK/dtypes_nc.pt"
torch_py without "$TESTDATA/torch/dtypes.pt" "$DTYPES_NC" complex128

for src in "$TESTDATA"/torch/*.pt "$TESTDATA"/sample/*.pt; do
    name=$(basename "$src" .pt)
    case "$name" in
        unsafe_*) continue ;;
        dtypes)
            case_run "dtypes.pt: complex128 refused by name" complex128_refused
            case_run "convert dtypes.pt less complex128" to_st "$DTYPES_NC" "$TESTDATA/torch/expected/dtypes.json" complex128
            continue ;;
    esac
    case_run "convert $name.pt" to_st "$src" "$(dirname "$src")/expected/$name.json"
done
for src in "$TESTDATA"/paddle/*.pdparams "$TESTDATA"/paddle/*.pdopt; do
    name=$(basename "$src")
    case_run "convert $name" to_st "$src" "$TESTDATA/paddle/expected/${name%.*}.json"
done
for src in "$TESTDATA/torch/basic.pt" "$TESTDATA/torch/views.pt" "$TESTDATA/torch/params.pt" \
           "$TESTDATA/torch/megatron.pt" "$DTYPES_NC"; do
    case_run "convert $(basename "$src") --dtype bfloat16" cast "$src" bfloat16
done
for dtype in float16 float32 float64; do
    case_run "convert dtypes.pt --dtype $dtype" cast "$DTYPES_NC" "$dtype"
done
run_batch st
case_run "split_big.pdparams (1 GiB, reassembled from 2 parts) -> safetensors" split_big
finish
