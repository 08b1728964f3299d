#!/usr/bin/env bash
# The DeepSpeed fixtures beyond what zero_to_fp32 accepts (see README_zero.md, "Beyond
# zero_to_fp32"), in testdata/zero/:
#   stage0_fp32_ws2, stage0_bf16_ws2   real ZeRO-0 runs (gen_zero.py train --stage 0)
#   tp2_stage2_fp32_ws2, tp2_stage3_bf16_ws2   tensor-parallel layouts made from committed
#                                      cases by gen_zero_tp.py (run_zero.sh must have made those)
# Each gets zero_to_fp32.error.txt: what DeepSpeed's own script says about it.
#
#   PYTHON=/path/to/venv/bin/python testdata/gen/run_zero_extra.sh [case ...]
set -euo pipefail

PYTHON=${PYTHON:-python3}
GEN_DIR=$(cd "$(dirname "$0")" && pwd)
ZERO_DIR=$(cd "$GEN_DIR/.." && pwd)/zero

export DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 GLOO_SOCKET_IFNAME=lo
export PYTHONHASHSEED=0 CUDA_VISIBLE_DEVICES=
PORT=${MASTER_PORT:-29517}

# ZeRO-0 writes no zero_to_fp32.py next to `latest`: use the installed one everywhere.
ZERO_TO_FP32=$("$PYTHON" -c 'import deepspeed.utils.zero_to_fp32 as m; print(m.__file__)' 2>/dev/null | tail -n 1)

train() {
    local case=$1 ws=$2
    shift 2
    rm -rf "${ZERO_DIR:?}/$case"
    mkdir -p "$ZERO_DIR/$case"
    echo "== $case: world size $ws: $*"
    "$PYTHON" -m torch.distributed.run --nproc_per_node "$ws" --master_addr 127.0.0.1 \
        --master_port "$PORT" "$GEN_DIR/gen_zero.py" train --out "$ZERO_DIR/$case" "$@"
}

# DeepSpeed's zero_to_fp32 on the case must fail; keep its exception line(s). The script
# runs as the copy save_checkpoint would place next to `latest` (run from inside the
# package, deepspeed/utils/torch.py would shadow torch), deleted afterwards.
record_refusal() {
    local case=$1 log out
    log=$(mktemp)
    out=$(mktemp -d)
    cp "$ZERO_TO_FP32" "$ZERO_DIR/$case/zero_to_fp32.py"
    if (cd "$ZERO_DIR/$case" && "$PYTHON" zero_to_fp32.py . "$out") >"$log" 2>&1; then
        echo "DeepSpeed's zero_to_fp32 converted $case; expected a refusal" >&2
        exit 1
    fi
    rm -f "$ZERO_DIR/$case/zero_to_fp32.py"
    awk '/^[A-Za-z_.]*(Error|Exception)(:|$)/ {buf=""; on=1} on {sub(/^[ \t]+/, ""); sub(/[ \t]+$/, ""); if ($0 != "") buf = buf $0 "\n"} END {printf "%s", buf}' \
        "$log" | sed "s|$out|OUTPUT_DIR|g" >"$ZERO_DIR/$case/zero_to_fp32.error.txt"
    rm -rf "$log" "$out"
    echo "   zero_to_fp32: $(head -c 300 "$ZERO_DIR/$case/zero_to_fp32.error.txt")"
}

run_case() {
    case $1 in
        stage0_fp32_ws2 | stage0_bf16_ws2)
            train "$1" 2 --stage 0 --dtype "${1:7:4}"
            record_refusal "$1"
            "$PYTHON" "$GEN_DIR/gen_zero.py" describe "$ZERO_DIR/$1" \
                --note "ZeRO-0 checkpoint; DeepSpeed's zero_to_fp32 rejects it (zero_to_fp32.error.txt)"
            ;;
        tp2_stage2_fp32_ws2)
            "$PYTHON" "$GEN_DIR/gen_zero_tp.py" "$ZERO_DIR/$1" "$ZERO_DIR/stage2_fp32_ws2" \
                "$ZERO_DIR/stage2_fp32_ws2_untied"
            record_refusal "$1"
            ;;
        tp2_stage3_bf16_ws2)
            "$PYTHON" "$GEN_DIR/gen_zero_tp.py" "$ZERO_DIR/$1" "$ZERO_DIR/stage3_bf16_ws2" \
                "$ZERO_DIR/stage3_bf16_ws2_untied"
            record_refusal "$1"
            ;;
        *) echo "unknown case $1" >&2; return 2 ;;
    esac
}

for c in ${@:-stage0_fp32_ws2 stage0_bf16_ws2 tp2_stage2_fp32_ws2 tp2_stage3_bf16_ws2}; do
    run_case "$c"
done
