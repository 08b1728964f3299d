#!/usr/bin/env bash
# Regenerates testdata/zero/<case>/ with real DeepSpeed ZeRO on CPU (gloo), then runs
# DeepSpeed's own zero_to_fp32 (the copy save_checkpoint writes next to `latest`) on every
# checkpoint and stores its outputs in <case>/expected/. See testdata/gen/README_zero.md.
#
#   PYTHON=/path/to/venv/bin/python testdata/gen/run_zero.sh            # every case
#   PYTHON=/path/to/venv/bin/python testdata/gen/run_zero.sh stage2_bf16_ws2 ...
#
# PYTHON must have torch, deepspeed, safetensors and huggingface_hub (versions in the README).
set -euo pipefail

PYTHON=${PYTHON:-python3}
GEN_DIR=$(cd "$(dirname "$0")" && pwd)
ZERO_DIR=$(cd "$GEN_DIR/.." && pwd)/zero
mkdir -p "$ZERO_DIR"

export DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 GLOO_SOCKET_IFNAME=lo
export PYTHONHASHSEED=0 CUDA_VISIBLE_DEVICES=
PORT=${MASTER_PORT:-29517}

# train CASE WORLD_SIZE gen_zero.py-train-args...
train() {
    local case=$1 ws=$2
    shift 2
    rm -rf "${ZERO_DIR:?}/$case"
    mkdir -p "$ZERO_DIR/$case"
    echo "== $case: world size $ws: $*"
    "$PYTHON" -m torch.distributed.run --nproc_per_node "$ws" --master_addr 127.0.0.1 \
        --master_port "$PORT" "$GEN_DIR/gen_zero.py" train --out "$ZERO_DIR/$case" "$@"
}

# convert CASE VARIANT SCRIPT args...   (VARIANT "default" writes into expected/)
# SCRIPT is zero_to_fp32.py or zero_to_torch.py, the copies save_checkpoint wrote.
# A failing run leaves only VARIANT/error.txt (the exception, without the traceback, which
# holds machine paths); partial outputs are removed. The script goes on.
convert() {
    local case=$1 variant=$2 script=$3 out=expected
    shift 3
    [ "$variant" = default ] || out=expected/$variant
    local log
    log=$(mktemp)
    echo "-- $case: $script . $out $*"
    if (cd "$ZERO_DIR/$case" && "$PYTHON" "$script" . "$out" "$@") >"$log" 2>&1; then
        rm -f "$log"
    else
        if [ "$variant" != default ]; then
            rm -rf "${ZERO_DIR:?}/$case/$out"
        fi
        mkdir -p "$ZERO_DIR/$case/$out"
        # from the last "SomethingError:" line to the end, lines trimmed, blank lines dropped
        awk '/^[A-Za-z_.]*(Error|Exception)(:|$)/ {buf=""; on=1} on {sub(/^[ \t]+/, ""); sub(/[ \t]+$/, ""); if ($0 != "") buf = buf $0 "\n"} END {printf "%s", buf}' \
            "$log" >"$ZERO_DIR/$case/$out/error.txt"
        echo "   failed: $(head -c 300 "$ZERO_DIR/$case/$out/error.txt")"
        rm -f "$log"
    fi
}

describe() {
    "$PYTHON" "$GEN_DIR/gen_zero.py" describe "$ZERO_DIR/$1" "${@:2}"
}

# The standard set of outputs: default .bin, plus optional extra variants.
standard() {
    local case=$1
    shift
    convert "$case" default zero_to_fp32.py
    for v in "$@"; do
        case $v in
            safetensors) convert "$case" safetensors zero_to_fp32.py --safe_serialization ;;
            sharded) convert "$case" sharded zero_to_fp32.py --max_shard_size 2KB ;;
            sharded_safetensors)
                convert "$case" sharded_safetensors zero_to_fp32.py --max_shard_size 2KB --safe_serialization ;;
            exclude_frozen) convert "$case" exclude_frozen zero_to_fp32.py --exclude_frozen_parameters ;;
            torch_bf16) convert "$case" torch_bf16 zero_to_torch.py --dtype bfloat16 ;;
        esac
    done
    describe "$case"
}

run_case() {
    case $1 in
        stage1_fp32_ws2) train "$1" 2 --stage 1 --dtype fp32 && standard "$1" ;;
        stage1_bf16_ws2) train "$1" 2 --stage 1 --dtype bf16 && standard "$1" ;;
        stage2_fp32_ws2) train "$1" 2 --stage 2 --dtype fp32 &&
            standard "$1" safetensors sharded sharded_safetensors exclude_frozen ;;
        stage2_fp32_ws2_untied) train "$1" 2 --stage 2 --dtype fp32 --untied &&
            standard "$1" safetensors sharded_safetensors ;;
        stage3_bf16_ws2_untied) train "$1" 2 --stage 3 --dtype bf16 --untied &&
            standard "$1" safetensors sharded_safetensors ;;
        stage2_bf16_ws2) train "$1" 2 --stage 2 --dtype bf16 && standard "$1" exclude_frozen ;;
        stage3_fp32_ws2) train "$1" 2 --stage 3 --dtype fp32 &&
            standard "$1" safetensors sharded sharded_safetensors exclude_frozen ;;
        stage3_bf16_ws2) train "$1" 2 --stage 3 --dtype bf16 && standard "$1" exclude_frozen torch_bf16 ;;
        stage3_fp32_ws2_subgroups) train "$1" 2 --stage 3 --dtype fp32 --sub-group-size 200 &&
            standard "$1" ;;
        stage2_bf16_ws4) train "$1" 4 --stage 2 --dtype bf16 && standard "$1" ;;
        stage3_fp32_ws4) train "$1" 4 --stage 3 --dtype fp32 && standard "$1" sharded ;;
        stage3_fp32_ws1) train "$1" 1 --stage 3 --dtype fp32 && standard "$1" ;;
        stage2_fp16_ws2) train "$1" 2 --stage 2 --dtype fp16 && standard "$1" ;;
        stage3_fp16_ws2) train "$1" 2 --stage 3 --dtype fp16 && standard "$1" ;;
        bf16_optimizer_ws2)
            # bf16 + ZeRO stage 1 + fp32 gradient accumulation selects DeepSpeed's BF16_Optimizer,
            # whose checkpoint zero_to_fp32 rejects: keep the checkpoint and the error, no expected/.
            train "$1" 2 --stage 1 --dtype bf16 --grad-accum-dtype fp32
            convert "$1" default zero_to_fp32.py
            mv "$ZERO_DIR/$1/expected/error.txt" "$ZERO_DIR/$1/zero_to_fp32.error.txt"
            rm -rf "$ZERO_DIR/$1/expected"
            describe "$1" --note "BF16_Optimizer checkpoint; DeepSpeed's zero_to_fp32 rejects it (zero_to_fp32.error.txt)"
            ;;
        *) echo "unknown case $1" >&2; return 2 ;;
    esac
}

ALL="stage1_fp32_ws2 stage1_bf16_ws2 stage2_fp32_ws2 stage2_bf16_ws2 stage3_fp32_ws2 stage3_bf16_ws2
stage3_fp32_ws2_subgroups stage2_bf16_ws4 stage3_fp32_ws4 stage3_fp32_ws1 stage2_fp16_ws2 stage3_fp16_ws2
bf16_optimizer_ws2 stage2_fp32_ws2_untied stage3_bf16_ws2_untied"

for c in ${@:-$ALL}; do
    run_case "$c"
done
du -sh "$ZERO_DIR"
