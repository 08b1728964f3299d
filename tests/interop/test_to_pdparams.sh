#!/usr/bin/env bash
# torch and safetensors inputs -> ckptconv convert -> .pdparams (pickle protocol 2 and 4),
# loaded by the real paddle.load: every source tensor by name, dtype, shape and bits
# (bfloat16 as its uint16 patterns, which is how paddle stores it).
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "paddle, safetensors, torch"

unknown_flags() {
    if [ -n "$(unknown_globals "$1")" ]; then echo --drop-unknown-objects; fi
}

# to_pd SRC EXPECTED_JSON PROTOCOL
to_pd() {
    local src="$1" exp="$2" protocol="$3" out
    out="$WORK/pd-$(basename "$src")-p$protocol.pdparams"
    # shellcheck disable=SC2046 # zero or one flag
    ckpt convert -q $(unknown_flags "$src") --protocol "$protocol" "$src" "$out"
    queue pd "$(basename "$src") -> pdparams protocol $protocol: paddle.load matches" converted "$out" "$exp" "$protocol"
}

# Inputs written by the safetensors package itself from the torch fixtures (safetensors has
# no complex128, so dtypes.pt goes in without it); their reference is what the package reads.
ST_DIR="$WORK/st-inputs"
mkdir -p "$ST_DIR"
torch_py without "$TESTDATA/torch/dtypes.pt" "$WORK/dtypes.pt" complex128
for f in "$TESTDATA/torch/basic.pt" "$TESTDATA/torch/views.pt" "$TESTDATA/torch/params.pt" \
         "$TESTDATA/torch/megatron.pt" "$TESTDATA/sample/tiny_llama.pt" "$WORK/dtypes.pt"; do
    name=$(basename "$f" .pt)
    queue st "make $name.safetensors" make "$f" "$ST_DIR/$name.safetensors"
    queue st "describe $name.safetensors" describe "$ST_DIR/$name.safetensors" "$ST_DIR/$name.st.json"
done
run_batch st

for protocol in 2 4; do
    for src in "$TESTDATA"/torch/*.pt "$TESTDATA"/sample/*.pt; do
        name=$(basename "$src" .pt)
        case "$name" in unsafe_*) continue ;; esac
        case_run "convert $name.pt -> pdparams (protocol $protocol)" \
            to_pd "$src" "$(dirname "$src")/expected/$name.json" "$protocol"
    done
    for src in "$ST_DIR"/*.safetensors; do
        name=$(basename "$src" .safetensors)
        case_run "convert $name.safetensors -> pdparams (protocol $protocol)" \
            to_pd "$src" "$ST_DIR/$name.st.json" "$protocol"
    done
done
run_batch pd
finish
