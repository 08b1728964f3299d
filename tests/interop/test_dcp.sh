#!/usr/bin/env bash
# PyTorch Distributed Checkpoints read by ckptconv at their global shapes:
# The checks run on fixtures written under torch 2.10 (dcp, dist_tp1, dist_tp2_bf16) and under
# torch 2.15 (dcp215, dist215_tp2; there megatron-core's .metadata also holds the ranks' save
# plans):
# - the plain DCP fixture (torch.distributed.checkpoint.save, world size 2: Shard(0) uneven,
#   Shard(1), Replicate, scalars, bytes items) consolidated to .safetensors equals what DCP
#   itself reads back (expected.json), under the real safetensors loader;
# - every megatron-core torch_dist fixture consolidated to .pt equals, per layer and bit for
#   bit, the legacy fixture of the same weights (TP-merged), Adam's moments included, under
#   the real torch.load;
# - consolidating twice gives the same bytes;
# - a torch_dist root taken like a legacy one: `reshard` to legacy TP1, TP2, PP2 and TP2 PP2
#   equals megatron-core's legacy files (all but rng_state, which torch_dist keeps as bytes),
#   `mcore2hf` gives transformers the logits Megatron computed, `verify` finds every layer
#   equal to the legacy twin; its plain optimizer is refused (legacy target) without --no-optimizer;
# - `reshard --to torch_dist` (legacy or torch_dist in, any target layout) writes what we read
#   back equal to the legacy fixture, bit for bit, under torch.load of the consolidation; one
#   data file per target rank. (That megatron-core's load_checkpoint takes it at TP1 and
#   TP2 PP2: testdata/gen/load_ours_dist.log, run by hand with the fixture environment.)
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "numpy, safetensors"

CHECK="$INTEROP_DIR/dcp_check.py"

plain() {
    local dcp="$1"
    ckpt convert -q "$TESTDATA/$dcp" "$WORK/$dcp.safetensors"
    ckpt convert -q --threads 1 "$TESTDATA/$dcp" "$WORK/${dcp}1.safetensors"
    cmp "$WORK/$dcp.safetensors" "$WORK/${dcp}1.safetensors"
    "$VENV_PYTHON" "$CHECK" plain "$WORK/$dcp.safetensors" "$TESTDATA/$dcp/expected.json"
}

megatron() {
    local dist="$1" legacy="$2" it out
    shift 2
    it=$(cat "$TESTDATA/megatron/$dist/latest_checkpointed_iteration.txt")
    out="$WORK/${dist//\//_}.pt"
    ckpt convert -q "$TESTDATA/megatron/$dist/$(printf 'iter_%07d' "$it")" "$out"
    "$TORCH_PYTHON" "$CHECK" megatron "$out" "$TESTDATA/megatron/$legacy" "$@"
}

case_run "plain DCP (world size 2) -> .safetensors equals DCP's own read" plain dcp
case_run "plain DCP of torch 2.15 -> .safetensors equals DCP's own read" plain dcp215
case_run "dist_tp1 equals tp1" megatron dist_tp1 tp1
case_run "dist215_tp2 equals tp2 (TP-merged)" megatron dist215_tp2 tp2
case_run "dist_tp2_bf16 equals tp2_bf16 (TP-merged)" megatron dist_tp2_bf16 tp2_bf16
case_run "distopt/a_tp2pp1dp1_plain: torch_dist equals its legacy twin, exp_avg and exp_avg_sq included" megatron distopt/a_tp2pp1dp1_plain/torch_dist distopt/a_tp2pp1dp1_plain/legacy --optimizer
reshard_to() {
    local dist="$1" to="$2" tp="$3" pp="$4" legacy="$5"
    ckpt reshard -q "$TESTDATA/megatron/$dist" "$WORK/$dist-$to" --tp "$tp" --pp "$pp" --no-optimizer
    "$TORCH_PYTHON" "$INTEROP_DIR/mcore_check.py" same "$WORK/$dist-$to" "$TESTDATA/megatron/$legacy" norng
}

optimizer_refused() {
    mkdir -p "$WORK/refused"
    expect_refusal "$WORK/refused" "$WORK/refused.log" "optimizer.state" "--no-optimizer" -- \
        "$CKPTCONV" reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/torch_dist" "$WORK/refused" --tp 1
}

to_hf() {
    ckpt mcore2hf -q "$TESTDATA/megatron/$1" "$WORK/hf-$1"
    "$VENV_PYTHON" "$INTEROP_DIR/hf_llama_check.py" logits "$WORK/hf-$1" "$TESTDATA/megatron/tp1/logits.json"
}

verify_twin() {
    ckpt verify "$TESTDATA/megatron/$1/iter_0000010" "$TESTDATA/megatron/tp2" --device cpu >"$WORK/verify-$1.txt"
    grep -q "^PASS" "$WORK/verify-$1.txt"
}

for src in dist_tp1 dist215_tp2; do
    for to in "tp1 1 1" "tp2 2 1" "pp2 1 2" "tp2pp2 2 2"; do
        set -- $to
        case_run "reshard $src -> legacy $1 equals megatron-core's $1" reshard_to "$src" "$1" "$2" "$3" "$1"
    done
done
case_run "reshard dist_tp2_bf16 -> legacy tp2 equals megatron-core's tp2_bf16" \
    reshard_to dist_tp2_bf16 tp2 2 1 tp2_bf16
case_run "reshard keeping torch_dist optimizer state is refused, nothing written" optimizer_refused
for src in dist_tp1 dist215_tp2; do
    case_run "mcore2hf of $src: transformers reproduces Megatron's logits" to_hf "$src"
    case_run "verify $src (iteration directory) against legacy tp2: every layer equal" verify_twin "$src"
done
to_dist() {
    local src="$1" tp="$2" pp="$3" legacy="$4" ranks
    shift 4
    ckpt reshard -q "$TESTDATA/megatron/$src" "$WORK/w-$src-$tp-$pp" --tp "$tp" --pp "$pp" --to torch_dist --no-optimizer "$@"
    ranks=$(find "$WORK/w-$src-$tp-$pp/iter_0000010" -name '__*_0.distcp' | wc -l)
    [ "$ranks" -eq $((tp * pp)) ] || { echo "$ranks tensor data files for TP $tp x PP $pp"; return 1; }
    ckpt convert -q "$WORK/w-$src-$tp-$pp/iter_0000010" "$WORK/w-$src-$tp-$pp.pt"
    "$TORCH_PYTHON" "$CHECK" megatron "$WORK/w-$src-$tp-$pp.pt" "$TESTDATA/megatron/$legacy"
    ckpt reshard -q "$WORK/w-$src-$tp-$pp" "$WORK/w-$src-$tp-$pp-back" --tp 2 --pp 1 --no-optimizer
    "$TORCH_PYTHON" "$INTEROP_DIR/mcore_check.py" same "$WORK/w-$src-$tp-$pp-back" "$TESTDATA/megatron/$legacy" norng
}

case_run "reshard legacy tp2 --to torch_dist at TP2, read back and to legacy again: tp2" to_dist tp2 2 1 tp2
case_run "reshard legacy tp2pp2 --to torch_dist at TP1 PP2: tp2" to_dist tp2pp2 1 2 tp2
case_run "reshard dist_tp1 --to torch_dist at TP4 PP2: tp2" to_dist dist_tp1 4 2 tp2
case_run "reshard dist215_tp2 --to torch_dist at TP4 PP2: tp2" to_dist dist215_tp2 4 2 tp2
case_run "reshard legacy tp2_bf16 --to torch_dist at TP1: tp2_bf16" to_dist tp2_bf16 1 1 tp2_bf16
finish
