#!/usr/bin/env bash
# Resume check of ckptconv's distributed-optimizer reshard (README_megatron_distopt.md,
# "Resume check"): for each pair X -> Y, Megatron's own reshard of X (build at Y, load X's
# fully_reshardable save, save legacy) and `ckptconv reshard` of X's legacy save are each loaded
# by megatron-core at Y and trained one more step (check_distopt_resume.py); both must print the
# same loss and the same hashes of the masters and moments. Appends to check_distopt_resume.log.
#
#   MCORE_PYTHON=VENV215/bin/python MEGATRON_LM=MLM WORK=/tmp/resume \
#       testdata/gen/run_distopt_resume.sh build/ckptconv
set -euo pipefail

CK=$(realpath "${1:?give the ckptconv binary}")
PY=${MCORE_PYTHON:?set MCORE_PYTHON to the Python that has torch and megatron-core 0.16.1}
MLM=${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout at tag core_v0.16.1}
WORK=${WORK:?set WORK to a scratch directory}
GEN_DIR=$(cd "$(dirname "$0")" && pwd)
FIX=$GEN_DIR/../megatron/distopt
LOG=${RESUME_LOG:-$GEN_DIR/check_distopt_resume.log}
mkdir -p "$WORK/oracle" "$WORK/ours"

OVERLAY=$WORK/overlay
mkdir -p "$OVERLAY/megatron"
for d in training legacy post_training rl; do ln -sfn "$MLM/megatron/$d" "$OVERLAY/megatron/$d"; done
for f in gpt_builders.py model_provider.py; do ln -sf "$MLM/$f" "$OVERLAY/$f"; done
export PYTHONPATH=$OVERLAY:$GEN_DIR
export OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PYTHONHASHSEED=0 CUDA_VISIBLE_DEVICES='' CUDA_DEVICE_MAX_CONNECTIONS=1
export MEGATRON_OVERLAY=$OVERLAY

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# torchrun N LOGFILE SCRIPT ARGS...: run in WORK, keep the log, show its tail on failure
torchrun() {
    local n=$1 log=$2
    shift 2
    if ! (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node "$n" \
            --master_addr 127.0.0.1 --master_port "$(free_port)" "$@") >"$log" 2>&1; then
        grep -v -e '^\[Gloo\]' -e 'warn' "$log" | tail -40
        echo "failed: $* (log: $log)" >&2
        return 1
    fi
}

# resume FAMILY LAYOUT DIR [FORMAT]: one more step at LAYOUT from DIR, RESUME lines into the log
resume() {
    local fam=$1 layout=$2 dir=$3 fmt=${4:-torch} n log
    n=$("$PY" "$GEN_DIR/gen_megatron_distopt.py" world "$layout")
    log=$WORK/resume.$(echo "$dir" | tr / _).log
    echo "== check_distopt_resume.py --family $fam --layout $layout --load $dir --ckpt-format $fmt ($n processes)" | tee -a "$LOG"
    if torchrun "$n" "$log" "$GEN_DIR/check_distopt_resume.py" --family "$fam" --layout "$layout" \
            --load "$dir" --ckpt-format "$fmt"; then
        grep '^RESUME ' "$log" | sed 's/^RESUME //' | sort -s -n -k2,2 | tee -a "$LOG"
    else
        echo "LOAD FAILED: $(grep -m1 -E '^(\[rank[0-9]+\]: )?[A-Za-z.]*(Error|Exception)' "$log")" | tee -a "$LOG"
    fi
}

# family source target ckptconv-options...
PAIRS=(
    "a a_tp2pp1dp2_buckets a_tp1pp2dp2 --tp 1 --pp 2 --dp 2 --ddp-bucket-size none"
    "a a_tp1pp1dp1 a_tp2pp1dp2_buckets --tp 2 --pp 1 --dp 2 --ddp-bucket-size 330"
    "b b_tp2pp2dp1_bf16_tied tp1pp1dp1 --tp 1 --pp 1 --dp 1"
    "c c_tp1pp2dp1_vpp2 tp1pp2dp1 --tp 1 --pp 2 --vpp 1 --dp 1"
)
# Megatron's own reshard first (kept in WORK: a second run reuses it)
for p in "${PAIRS[@]}"; do
    read -r fam src dst opts <<<"$p"
    [ -d "$WORK/$src" ] || cp -r "$FIX/$src" "$WORK/$src"
    n=$("$PY" "$GEN_DIR/gen_megatron_distopt.py" world "$dst")
    o=oracle/${src}__to__$dst
    if [ ! -d "$WORK/$o" ]; then
        echo "== oracle $src -> $dst ($n processes)"
        torchrun "$n" "$WORK/$o.log" "$GEN_DIR/gen_megatron_distopt.py" reshard --config "$src" --target "$dst"
    fi
done
[ -x "$CK" ] || { echo "no ckptconv at $CK" >&2; exit 2; }
{
    echo
    echo "# run_distopt_resume.sh $(date -u +%Y-%m-%d): ckptconv's reshard vs Megatron's own, one step"
    echo "# after the load at the target layout; torch $("$PY" -c 'import torch; print(torch.__version__)'),"
    echo "# megatron-core 0.16.1; ckptconv $("$CK" --version 2>&1 | head -1)"
} >>"$LOG"
for p in "${PAIRS[@]}"; do
    read -r fam src dst opts <<<"$p"
    o=oracle/${src}__to__$dst
    u=ours/${src}__to__$dst
    rm -rf "${WORK:?}/$u"
    echo "# ckptconv reshard $src/legacy $u $opts" >>"$LOG"
    # shellcheck disable=SC2086
    if ! (cd "$WORK" && "$CK" reshard "$src/legacy" "$u" $opts) 2>"$WORK/$u.err"; then
        echo "CKPTCONV FAILED: $(cat "$WORK/$u.err")" | tee -a "$LOG"
        continue
    fi
    resume "$fam" "$dst" "$o"
    resume "$fam" "$dst" "$u"
done
# torch_dist outputs, both optimizer forms, for the first pair
read -r fam src dst opts <<<"${PAIRS[0]}"
for form in dp_reshardable fully_reshardable; do
    u=ours/${src}__to__${dst}_$form
    rm -rf "${WORK:?}/$u"
    echo "# ckptconv reshard $src/legacy $u $opts --to torch_dist --optim-format $form" >>"$LOG"
    # shellcheck disable=SC2086
    if ! (cd "$WORK" && "$CK" reshard "$src/legacy" "$u" $opts --to torch_dist --optim-format "$form") \
            2>"$WORK/$u.err"; then
        echo "CKPTCONV FAILED: $(cat "$WORK/$u.err")" | tee -a "$LOG"
        continue
    fi
    resume "$fam" "$dst" "$u" torch_dist
done
