#!/usr/bin/env bash
# `ckptconv zero-to-fp32` on every DeepSpeed fixture in testdata/zero, with each of
# DeepSpeed's options, against the outputs DeepSpeed's own zero_to_fp32 wrote for them:
# file names, index json and .safetensors byte for byte, .bin tensors (names, order,
# dtypes, shapes, bytes, tied weights sharing storage) under the real torch.load, and the
# .safetensors under the real safetensors loader. Where DeepSpeed has no output for an
# option, the expectation is derived from its default output (zero_fp32_check.py says
# how); where it refuses (tied weights as safetensors), ours must refuse and leave nothing.
# Beyond DeepSpeed: --optimizer-states against the partitions, tensor-parallel fixtures
# (each rank equals the case it was made from), ZeRO-0.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "safetensors, torch"

CHECK="$INTEROP_DIR/zero_fp32_check.py"
OUT="$WORK/out"
mkdir -p "$OUT"

# check CHECKER NAME MODE ARGS...: queue a zero_fp32_check.py check (CHECKER: torch or venv).
check() {
    local checker="$1" name="$2"
    shift 2
    local IFS=$'\t'
    printf '%s\t%s\n' "$name" "$*" >>"$WORK/$checker.zbatch"
}

run_checks() {
    local checker="$1" python="$2" file="$WORK/$1.zbatch" out="$WORK/$1.zbatch.out" rc p f
    [ -s "$file" ] || return 0
    set +e
    "$python" "$CHECK" batch "$file" >"$out" 2>&1
    rc=$?
    set -e
    grep -v '^BATCH ' "$out" || true
    read -r _ p f <<<"$(grep '^BATCH ' "$out" | tail -n 1)"
    if [ "$rc" -ne 0 ] || [ -z "${p:-}" ]; then
        FAILED=$((FAILED + 1))
        FAILURES+=("$checker checker crashed (exit $rc)")
        return 0
    fi
    PASSED=$((PASSED + p))
    FAILED=$((FAILED + f))
    [ "$f" -eq 0 ] || FAILURES+=("$f $checker check(s), see FAIL lines above")
}

# convert CASE VARIANT OPTIONS...: ckptconv zero-to-fp32 into $OUT/CASE/VARIANT; a failure
# is counted and the checks of that output are not queued.
convert() {
    local name="$1" variant="$2"
    shift 2
    case_run "$name/$variant: ckptconv zero-to-fp32 $*" \
        ckpt zero-to-fp32 -q "$TESTDATA/zero/$name" "$OUT/$name/$variant" "$@" &&
        [ -d "$OUT/$name/$variant" ]
}

# refused CASE VARIANT NEEDLE OPTIONS...: must fail naming NEEDLE and leave nothing behind.
refused() {
    local name="$1" variant="$2" needle="$3"
    shift 3
    mkdir -p "$OUT/$name/refused-$variant"
    case_run "$name/$variant: refused ($needle)" expect_refusal "$OUT/$name/refused-$variant" \
        "$WORK/refused.log" "$needle" -- "$CKPTCONV" zero-to-fp32 -q "$TESTDATA/zero/$name" \
        "$OUT/$name/refused-$variant/out" "$@"
}

has_alias() {
    grep -q '"alias_of": "' "$1/expected/tensors.json"
}

# DeepSpeed's run recorded output files of KIND (their bytes, when not committed, by hash)
recorded() {
    "$TORCH_PYTHON" -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1]))["outputs"].get(sys.argv[2], {}).get("files"))' \
        "$1/expected/tensors.json" "$2"
}

n=0
for case_dir in "$TESTDATA"/zero/*/; do
    name=$(basename "$case_dir")
    exp="$case_dir/expected"
    [ -f "$exp/pytorch_model.bin" ] || continue
    n=$((n + 1))
    convert "$name" default && check torch "$name/default" same "$OUT/$name/default" "$exp"
    if [ -d "$exp/sharded" ]; then
        convert "$name" sharded --max-shard-size 2KB &&
            check torch "$name/sharded" same "$OUT/$name/sharded" "$exp/sharded"
    else
        convert "$name" sharded --max-shard-size 2KB &&
            check torch "$name/sharded" derived "$OUT/$name/sharded" "$case_dir" 2000 0
    fi
    if [ -d "$exp/exclude_frozen" ]; then
        convert "$name" exclude_frozen --exclude-frozen-parameters &&
            check torch "$name/exclude_frozen" same "$OUT/$name/exclude_frozen" "$exp/exclude_frozen"
    else
        convert "$name" exclude_frozen --exclude_frozen_parameters &&
            check torch "$name/exclude_frozen" derived "$OUT/$name/exclude_frozen" "$case_dir" 5000000000 1
    fi
    if [ -f "$exp/safetensors/model.safetensors" ]; then
        convert "$name" safetensors --safe-serialization &&
            check torch "$name/safetensors" same "$OUT/$name/safetensors" "$exp/safetensors" &&
            check venv "$name/safetensors" stload "$OUT/$name/safetensors" "$exp/safetensors"
    elif recorded "$case_dir" safetensors; then
        convert "$name" safetensors --safe-serialization &&
            check torch "$name/safetensors" hashes "$OUT/$name/safetensors" "$case_dir" safetensors &&
            check venv "$name/safetensors" stbin "$OUT/$name/safetensors" "$exp/pytorch_model.bin"
    elif has_alias "$case_dir"; then
        refused "$name" safetensors "tied weights" --safe-serialization
    else
        convert "$name" safetensors --safe_serialization &&
            check venv "$name/safetensors" stbin "$OUT/$name/safetensors" "$exp/pytorch_model.bin"
    fi
    if [ -f "$exp/sharded_safetensors/model.safetensors.index.json" ]; then
        convert "$name" sharded_safetensors --safe-serialization --max-shard-size 2KB &&
            check torch "$name/sharded_safetensors" same "$OUT/$name/sharded_safetensors" \
                "$exp/sharded_safetensors" &&
            check venv "$name/sharded_safetensors" stload "$OUT/$name/sharded_safetensors" \
                "$exp/sharded_safetensors"
    elif [ -f "$exp/sharded_safetensors/error.txt" ]; then
        refused "$name" sharded_safetensors "tied weights" --safe-serialization --max-shard-size 2KB
    fi
    convert "$name" optimizer_states --optimizer-states &&
        check torch "$name/optimizer_states" optim "$OUT/$name/optimizer_states" "$case_dir/global_step3" 0
done
[ "$n" -ge 14 ] || die "only $n DeepSpeed fixtures with expected outputs under $TESTDATA/zero"

# BF16_Optimizer: DeepSpeed refuses it; its optimizer states follow the stage-1 layout.
convert bf16_optimizer_ws2 optimizer_states --optimizer-states &&
    check torch "bf16_optimizer_ws2/optimizer_states" optim "$OUT/bf16_optimizer_ws2/optimizer_states" \
        "$TESTDATA/zero/bf16_optimizer_ws2/global_step3" 0

# Tensor parallelism: one output per model-parallel rank, each equal to its source case.
for tp in "$TESTDATA"/zero/tp2_*/; do
    name=$(basename "$tp")
    convert "$name" default || continue
    convert "$name" optimizer_states --optimizer-states || continue
    for mp in 00 01; do
        src=$("$TORCH_PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
            "$tp/sources.json" "mp_rank_$mp")
        check torch "$name/mp_rank_$mp" same "$OUT/$name/default/mp_rank_$mp" "$TESTDATA/zero/$src/expected"
        check torch "$name/mp_rank_$mp/optimizer_states" optim "$OUT/$name/optimizer_states/mp_rank_$mp" \
            "$tp/global_step3" "$mp"
    done
done

# ZeRO-0: fp32 is the module state dict; bf16 keeps its fp32 masters unnamed and is refused.
convert stage0_fp32_ws2 default &&
    check torch "stage0_fp32_ws2/default" module "$OUT/stage0_fp32_ws2/default" \
        "$TESTDATA/zero/stage0_fp32_ws2/global_step3/mp_rank_00_model_states.pt"
refused stage0_bf16_ws2 default "bfloat16 model"

run_checks torch "$TORCH_PYTHON"
run_checks venv "$VENV_PYTHON"
finish
