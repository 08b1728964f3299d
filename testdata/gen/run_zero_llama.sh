#!/usr/bin/env bash
# Regenerates testdata/zero/llama_<case>/: DeepSpeed ZeRO checkpoints of a tiny transformers
# LlamaForCausalLM trained on CPU (gloo), DeepSpeed's own zero_to_fp32 output of each
# (expected/pytorch_model.bin, expected/safetensors/model.safetensors), the model's
# config.json and its logits. See
# testdata/gen/README_zero.md ("LLaMA cases").
#
#   PYTHON=/path/to/venv/bin/python testdata/gen/run_zero_llama.sh                      # both cases
#   PYTHON=/path/to/venv/bin/python testdata/gen/run_zero_llama.sh llama_stage2_bf16_ws2
#
# PYTHON must have torch, deepspeed, transformers, safetensors and huggingface_hub.
set -euo pipefail

PYTHON=${PYTHON:-python3}
GEN_DIR=$(cd "$(dirname "$0")" && pwd)
ZERO_DIR=$(cd "$GEN_DIR/.." && pwd)/zero
mkdir -p "$ZERO_DIR"

export DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 GLOO_SOCKET_IFNAME=lo
export PYTHONHASHSEED=0 CUDA_VISIBLE_DEVICES=
PORT=${MASTER_PORT:-29527}

# run_case CASE STAGE WORLD_SIZE
run_case() {
    local case=$1 stage=$2 ws=$3 dir=$ZERO_DIR/$1
    rm -rf "${dir:?}"
    mkdir -p "$dir"
    echo "== $case: ZeRO-$stage bf16, world size $ws"
    "$PYTHON" -m torch.distributed.run --nproc_per_node "$ws" --master_addr 127.0.0.1 \
        --master_port "$PORT" "$GEN_DIR/gen_zero_llama.py" train --stage "$stage" --out "$dir"
    # the layout of the other cases: expected/ = no options, expected/safetensors/ = safetensors
    echo "-- $case: zero_to_fp32.py . expected"
    (cd "$dir" && "$PYTHON" zero_to_fp32.py . expected)
    echo "-- $case: zero_to_fp32.py . expected/safetensors --safe_serialization"
    (cd "$dir" && "$PYTHON" zero_to_fp32.py . expected/safetensors --safe_serialization)
    chmod 644 "$dir"/expected/safetensors/*.safetensors    # safetensors writes 0600
    "$PYTHON" "$GEN_DIR/gen_zero_llama.py" logits "$dir"
    # describe also deletes the copies of DeepSpeed's scripts save_checkpoint placed in $dir
    "$PYTHON" "$GEN_DIR/gen_zero_llama.py" describe "$dir"
    # its bytes are kept as the names, sizes and sha256 describe recorded in tensors.json
    rm -r "$dir/expected/safetensors"
}

for c in ${@:-llama_stage2_bf16_ws2 llama_stage3_bf16_ws2}; do
    case $c in
        llama_stage2_bf16_ws2) run_case "$c" 2 2 ;;
        llama_stage3_bf16_ws2) run_case "$c" 3 2 ;;
        *) echo "unknown case $c" >&2; exit 2 ;;
    esac
done
du -sh "$ZERO_DIR"/llama_*
