#!/usr/bin/env bash
# `ckptconv reshard` of a distributed optimizer's legacy state (distrib_optim.pt) against
# Megatron's own reshard (testdata/megatron/distopt/oracle.json and oracle_moe.json; testdata/gen/
# README_megatron_distopt.md): each fixture X, resharded by ckptconv from its legacy save to
# each oracle layout Y (TP, PP, VPP, DP, buckets), equals what megatron-core wrote at Y after
# loading X's fully_reshardable save, bit for bit: the model, the fp32 masters, both Adam
# moments, numel_unpadded, the param groups and step, the scheduler.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch

pair() { "$TORCH_PYTHON" "$INTEROP_DIR/distopt_check.py" "$CKPTCONV" "$TESTDATA" "$2" "$WORK" "$1"; }

# oracle_moe.json: the mixture-of-experts fixture (chained optimizer) to other TP/PP at its EP
for file in oracle.json oracle_moe.json; do
    ORACLE="$TESTDATA/megatron/distopt/$file"
    [ -f "$ORACLE" ] || die "$ORACLE is missing"
    N=$("$TORCH_PYTHON" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["pairs"]))' "$ORACLE")
    [ "$N" -gt 0 ] || die "$ORACLE holds no pairs"
    for ((i = 0; i < N; i++)); do
        name=$("$TORCH_PYTHON" -c 'import json, sys; p = json.load(open(sys.argv[1]))["pairs"][int(sys.argv[2])]; print(p["source"].split("/")[2], "->", p["target"])' "$ORACLE" "$i")
        case_run "distopt $name" pair "$file" "$i"
    done
done
finish
