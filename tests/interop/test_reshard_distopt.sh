#!/usr/bin/env bash
# `ckptconv reshard` of a distributed optimizer's legacy state (distrib_optim.pt) against
# Megatron's own reshard (testdata/megatron/distopt/oracle.json and oracle_moe.json; testdata/gen/
# README_megatron_distopt.md): each fixture X, resharded by ckptconv from its legacy save to
# each oracle layout Y (TP, PP, VPP, DP, buckets), equals what megatron-core wrote at Y after
# loading X's fully_reshardable save, bit for bit: the model, the fp32 masters, both Adam
# moments, numel_unpadded, the param groups and step, the scheduler. The same against
# oracle_versions.json (megatron-core 0.13.1's and 0.19's own reshards), from each committed
# form ckptconv reads of those versions' saves.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch

pair() { "$TORCH_PYTHON" "$INTEROP_DIR/distopt_check.py" "$CKPTCONV" "$TESTDATA" "$1" "$WORK" "${2:-oracle.json}" "${3:-legacy}"; }

# oracle_moe.json: the mixture-of-experts fixture (chained optimizer) to other TP/PP at its EP,
# from its legacy and its torch_dist dp_reshardable save; oracle_moe_plain.json: the same model
# with the non-distributed optimizer to other EP and expert TP; oracle_fp16_inst.json: fp16 (the grad
# scaler) with three optimizer instances, to other TP/PP/DP and instances
for file in oracle.json oracle_moe.json oracle_moe_plain.json oracle_fp16_inst.json; do
    ORACLE="$TESTDATA/megatron/distopt/$file"
    [ -f "$ORACLE" ] || die "$ORACLE is missing"
    N=$("$TORCH_PYTHON" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["pairs"]))' "$ORACLE")
    [ "$N" -gt 0 ] || die "$ORACLE holds no pairs"
    for ((i = 0; i < N; i++)); do
        name=$("$TORCH_PYTHON" -c 'import json, sys; p = json.load(open(sys.argv[1]))["pairs"][int(sys.argv[2])]; print(p["source"].split("/")[2], "->", p["target"])' "$ORACLE" "$i")
        case_run "distopt $name" pair "$i" "$file"
        # the MoE fixture's torch_dist save too (chained optimizer, expert grad buffers), and
        # its files at expert TP 1 under TP 2 (no file for some TP x EP ranks)
        if [ "$file" = oracle_moe.json ] || [ "$file" = oracle_moe_plain.json ]; then
            [ "$file" = oracle_moe_plain.json ] || case_run "distopt $name (dp_reshardable)" pair "$i" "$file" dp_reshardable
            case_run "distopt $name (via TP 2 EP 2 expert TP 1)" pair "$i" "$file" etp1
        fi
    done
done

VERSIONS="$TESTDATA/megatron/distopt/oracle_versions.json"
[ -f "$VERSIONS" ] || die "$VERSIONS is missing"
N=$("$TORCH_PYTHON" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["pairs"]))' "$VERSIONS")
for ((i = 0; i < N; i++)); do
    name=$("$TORCH_PYTHON" -c 'import json, sys; p = json.load(open(sys.argv[1]))["pairs"][int(sys.argv[2])]; print(p["source"].split("/")[2], "->", p["target"])' "$VERSIONS" "$i")
    case "$name" in
    core019*) forms="legacy dp_reshardable" ;;
    *) forms="legacy fully_sharded_model_space dp_zero_gather_scatter" ;;
    esac
    for form in $forms; do
        case_run "distopt $name ($form)" pair "$i" oracle_versions.json "$form"
    done
done
finish
