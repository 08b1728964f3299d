#!/usr/bin/env bash
# Distributed-optimizer fixtures written by megatron-core versions other than 0.16.1
# (testdata/megatron/distopt/<tag>_<config>/<form>/ and expected.json), with the generator of the 0.16.1 fixtures
# (gen_megatron_distopt.py) run through gen_megatron_distopt_versions.py.
# See testdata/gen/README_megatron_distopt_versions.md.
#
#   MCORE_PYTHON=/venv/bin/python MEGATRON_LM=/path/to/Megatron-LM-at-tag TAG=core019 \
#       testdata/gen/run_megatron_distopt_versions.sh            # train + save every form
#   ... run_megatron_distopt_versions.sh oracle                  # that version's own reshard
#                                                                # of them: distopt/oracle_versions.json
#                                                                # (needs WORK= of the train run)
#   CONFIG=a_tp2pp1dp2_gaps ... run_megatron_distopt_versions.sh check
#                                                                # fully_reshardable check only
#
# TAG core013: Python 3.11, torch 2.7.1, megatron-core 0.13.1 (PyPI), MEGATRON_LM at core_v0.13.1.
# TAG core019: Python 3.12, torch 2.15.0, megatron-core from the tree of tag core_v0.19.0 (its
#   megatron/core importable, e.g. through a .pth file; no C++ helpers), MEGATRON_LM that tree.
# Both: numpy<2, six, psutil, einops, transformers, safetensors.
set -euo pipefail

PY=${MCORE_PYTHON:?set MCORE_PYTHON}
MLM=${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM tree at the tag of the installed megatron-core}
TAG=${TAG:?set TAG to core013 or core019}
CONFIG=${CONFIG:-a_tp2pp1dp2_buckets}
GEN_DIR=$(cd "$(dirname "$0")" && pwd)
TESTDATA=$(cd "$GEN_DIR/.." && pwd)
OUT=${DISTOPT_OUT:-$TESTDATA/megatron/distopt}
KEEP_WORK=${WORK:-}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$OUT" "$WORK"
[ -n "$KEEP_WORK" ] || trap 'rm -rf "$WORK"' EXIT

# megatron/<everything but core> and the entry modules from the tree; megatron.core is the
# installed package (megatron is a namespace package)
OVERLAY=$WORK/overlay
rm -rf "$OVERLAY"
mkdir -p "$OVERLAY/megatron"
for d in "$MLM"/megatron/*/; do
    d=${d%/}
    [ "$(basename "$d")" = core ] || ln -sfn "$d" "$OVERLAY/megatron/$(basename "$d")"
done
for f in gpt_builders.py model_provider.py pretrain_gpt.py; do
    [ ! -e "$MLM/$f" ] || ln -sf "$MLM/$f" "$OVERLAY/$f"
done
export PYTHONPATH=$OVERLAY:$GEN_DIR
export OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PYTHONHASHSEED=0 CUDA_VISIBLE_DEVICES= CUDA_DEVICE_MAX_CONNECTIONS=1

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run NAME NPROC gen_megatron_distopt_versions.py arguments...
run() {
    local name=$1 n=$2
    shift 2
    echo "== $name: $n processes"
    if ! (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node "$n" \
            --master_addr 127.0.0.1 --master_port "$(free_port)" \
            "$GEN_DIR/gen_megatron_distopt_versions.py" "$@") >"$WORK/$name.log" 2>&1; then
        grep -v -e '^\[Gloo\]' "$WORK/$name.log" | tail -60
        echo "$name failed (log: $WORK/$name.log)" >&2
        return 1
    fi
}

G=("$GEN_DIR/gen_megatron_distopt_versions.py")
NAME=${TAG}_$CONFIG
MODE=${1:-train}
case $MODE in
train)
    rm -rf "${WORK:?}/$CONFIG"
    run "$CONFIG" "$("$PY" "$GEN_DIR/gen_megatron_distopt.py" world "$CONFIG")" train --tag "$TAG" --config "$CONFIG"
    rm -rf "${OUT:?}/$NAME"
    mkdir -p "$OUT/$NAME"
    for form in $("$PY" "${G[@]}" keep --tag "$TAG" --config "$CONFIG"); do
        cp -r "$WORK/$CONFIG/$form" "$OUT/$NAME/$form"
    done
    "$PY" "${G[@]}" describe --tag "$TAG" --config "$CONFIG" "$WORK" "$OUT"
    [ ! -d "$WORK/$CONFIG/fully_reshardable" ] || "$PY" "${G[@]}" check --tag "$TAG" --config "$CONFIG" "$WORK"
    du -sb "$OUT/$NAME" "$OUT/$NAME"/*
    ;;
oracle)
    # needs the WORK of a train run (WORK=dir)
    [ -n "$KEEP_WORK" ] || { echo "set WORK to the work directory of a train run" >&2; exit 2; }
    mkdir -p "$WORK/oracle"
    "$PY" "${G[@]}" oracle-plan --tag "$TAG" --config "$CONFIG" >"$WORK/oracle_plan.txt"
    while read -r out nproc src target; do
        rm -rf "${WORK:?}/$out"
        run "$out" "$nproc" reshard --tag "$TAG" --config "$CONFIG" --source "$src" \
            --target "$target" --out "$out"
    done <"$WORK/oracle_plan.txt"
    "$PY" "${G[@]}" oracle --tag "$TAG" --config "$CONFIG" "$WORK" "$OUT"
    ;;
check)
    # the fully_reshardable check of another config's run (e.g. CONFIG=a_tp2pp1dp2_gaps)
    rm -rf "${WORK:?}/$CONFIG"
    run "$CONFIG" "$("$PY" "$GEN_DIR/gen_megatron_distopt.py" world "$CONFIG")" train --tag "$TAG" --config "$CONFIG"
    "$PY" "${G[@]}" check --tag "$TAG" --config "$CONFIG" "$WORK"
    ;;
*)
    echo "unknown mode $MODE" >&2
    exit 2
    ;;
esac
