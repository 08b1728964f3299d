#!/usr/bin/env bash
# `ckptconv reshard` on PaddleNLP directories, `pd2te`/`te2pd --tp/--pp`, `paddle2hf` and
# `hf2paddle`, on checkpoints PaddleNLP itself wrote (testdata/paddlenlp,
# testdata/gen/README_paddlenlp_reshard.md):
#  - every layout to every other (TP1, TP2, PP2, TP2 PP2, PP4, TP4 with k/v whole on every rank;
#    fp32 and bf16 with master weights) equals PaddleNLP's own files at that layout, bit for
#    bit: model files, .pdopt moments, beta powers, master weights, LR_Scheduler, name tables,
#    key order, pickle variant, config.json; paddle.load loads every output;
#  - PaddleNLP 3's own fleet runs (TP1, TP2, PP2, PP3, each stage naming its parameters from
#    0) resharded to one another equal PaddleNLP 3's files, and every output resumes with
#    paddle's AdamW under the names a PaddleNLP process gives;
#  - round trips give back every file byte for byte;
#  - layouts no fixture has merge back, with PaddleNLP's TP rules, to the single-card state;
#  - the unified checkpoint (safetensors) reshards to the same model files;
#  - pd2te --tp 2 equals reshard then pd2te, and pd2te then reshard (Transformer Engine
#    layers reshard too); te2pd --tp/--pp gives the Paddle tensors back;
#  - paddle2hf's output runs to PaddleNLP's own logits; HF -> Paddle -> HF keeps every tensor;
#  - refusals leave nothing behind.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_venv "paddle, numpy, safetensors"

PD="$TESTDATA/paddlenlp"
OUT="$WORK/out"
mkdir -p "$OUT"

merge_py() { "$VENV_PYTHON" "$INTEROP_DIR/paddlenlp_merge.py" "$@"; }
hf_py() { "$VENV_PYTHON" "$INTEROP_DIR/hf_llama_check.py" "$@"; }

layout() {
    case "$1" in
        tp1) echo "--tp 1 --pp 1" ;;
        tp2) echo "--tp 2 --pp 1" ;;
        pp2) echo "--tp 1 --pp 2" ;;
        tp2pp2) echo "--tp 2 --pp 2" ;;
        pp4) echo "--tp 1 --pp 4" ;;
        tp4) echo "--tp 4 --pp 1" ;;
        pp3) echo "--tp 1 --pp 3" ;;
    esac
}

# weights DIR: the model and optimizer files of a directory, one per line
weights() {
    (cd "$1" && ls | grep -E '^(model_state.*\.pdparams|optimizer.*\.pdopt)$')
}

# same_layout OUT EXPECTED: the same files, config.json byte for byte; each file queued for
# pd_check (raw pickle equal, paddle.load equal)
same_layout() {
    local out="$1" exp="$2" f
    diff <(weights "$exp") <(weights "$out")
    cmp "$exp/config.json" "$out/config.json"
    for f in $(weights "$exp"); do
        queue pd "$(basename "$out")/$f raw" raw_equal "$exp/$f" "$out/$f"
        queue pd "$(basename "$out")/$f paddle.load" equal "$exp/$f" "$out/$f"
    done
}

reshard_case() {
    local from="$1" to="$2" dir="$3"
    # shellcheck disable=SC2046
    ckpt reshard "$PD/$from" "$dir" $(layout "${to#*_}") -q
    same_layout "$dir" "$PD/$to"
}

for dtype in fp32 bf16; do
    if [ "$dtype" = fp32 ]; then LAYOUTS=(tp1 tp2 pp2 tp2pp2 pp4 tp4); else LAYOUTS=(tp1 tp2 pp2 tp2pp2); fi
    for from in "${LAYOUTS[@]}"; do
        for to in "${LAYOUTS[@]}"; do
            [ "$from" = "$to" ] && continue
            case_run "reshard ${dtype}_$from -> $to" reshard_case "${dtype}_$from" "${dtype}_$to" \
                "$OUT/${dtype}_$from-$to"
        done
    done
done
run_batch pd

# PaddleNLP 3's own fleet runs (testdata/paddlenlp/fleet3_*, README_paddlenlp3.md), every
# stage naming its parameters from 0: each layout resharded to each other equals PaddleNLP 3's
# own files at that layout (names, name tables, .pdopt keys, values), and each output resumes
# with paddle's AdamW rank by rank under names a PaddleNLP process gives (paddle_resume.py).
fleet3_case() {
    local from="$1" to="$2" dir="$3" f
    # shellcheck disable=SC2046
    ckpt reshard "$PD/fleet3_$from" "$dir" $(layout "$to") -q
    diff <(weights "$PD/fleet3_$to") <(weights "$dir")
    for f in $(weights "$PD/fleet3_$to"); do
        queue pd "$(basename "$dir")/$f paddle.load" equal "$PD/fleet3_$to/$f" "$dir/$f"
    done
    "$VENV_PYTHON" "$INTEROP_DIR/paddle_resume.py" "$dir" >/dev/null
}
for from in tp1 tp2 pp2 pp3; do
    for to in tp1 tp2 pp2 pp3; do
        [ "$from" = "$to" ] && continue
        case_run "reshard fleet3_$from -> $to = PaddleNLP 3's own files; resumes" fleet3_case "$from" "$to" \
            "$OUT/fleet3_$from-$to"
    done
done
run_batch pd

# Round trips: through another layout and back, every file byte for byte (our writer is
# deterministic; the first hop's output is compared with a direct rewrite at the same layout).
round_trip() {
    local src="$1" via="$2" dir="$3" f
    # shellcheck disable=SC2046
    ckpt reshard "$PD/$src" "$dir/direct" $(layout "${src#*_}") -q
    # shellcheck disable=SC2046
    ckpt reshard "$PD/$src" "$dir/via" $(layout "$via") -q
    # shellcheck disable=SC2046
    ckpt reshard "$dir/via" "$dir/back" $(layout "${src#*_}") -q
    for f in $(ls "$dir/direct"); do
        cmp "$dir/direct/$f" "$dir/back/$f"
    done
}
case_run "round trip fp32_tp2pp2 -> tp1 -> tp2pp2, byte for byte" round_trip fp32_tp2pp2 tp1 "$OUT/rt1"
case_run "round trip bf16_tp2pp2 -> pp4 -> tp2pp2, byte for byte" round_trip bf16_tp2pp2 pp4 "$OUT/rt2"
case_run "round trip fp32_tp4 -> tp2 -> tp4, byte for byte" round_trip fp32_tp4 tp2 "$OUT/rt3"
case_run "round trip bf16_pp2 -> tp4 -> pp2, byte for byte" round_trip bf16_pp2 tp4 "$OUT/rt4"

# Layouts no fixture has: merged back with PaddleNLP's rules (tests/interop/paddlenlp_merge.py,
# checked against PaddleNLP's own functions), they are the single-card state.
merges_to() {
    local dir="$1" ref="$2"
    merge_py "$dir" --json "$dir.json"
    merge_py "$PD/$ref" --json "$dir.ref.json"
    cmp "$dir.ref.json" "$dir.json"
}
unseen() {
    local from="$1" dir="$2"
    shift 2
    ckpt reshard "$PD/$from" "$dir" -q "$@"
    merges_to "$dir" "${from%%_*}_tp1"
}
case_run "bf16_tp2pp2 -> tp4 pp4 merges to bf16_tp1" unseen bf16_tp2pp2 "$OUT/u1" --tp 4 --pp 4
case_run "fp32_pp4 -> tp4 pp2 merges to fp32_tp1" unseen fp32_pp4 "$OUT/u2" --tp 4 --pp 2
case_run "fp32_tp2 -> pp3 (uneven: stages of 1, 2, 1 layers) merges to fp32_tp1" unseen fp32_tp2 "$OUT/u3" --tp 1 --pp 3

pp3_layers() {
    local dir="$OUT/u3"
    "$VENV_PYTHON" - "$dir" <<'EOF'
import sys, pickle, os, re
d = sys.argv[1]
got = {}
for s in range(3):
    with open(os.path.join(d, f"model_state.pp{s:02d}.pdparams"), "rb") as f:
        keys = pickle.load(f, encoding="latin1").keys()
    got[s] = sorted({int(m.group(1)) for k in keys if (m := re.match(r"llama\.layers\.(\d+)\.", k))})
# 4 layers do not divide by 3: PaddleNLP's pipe segments its 7 layers (embedding, 4 decoder
# layers, norm, head) with SegmentLayers "uniform", boundaries [0, 2, 4, 7]
assert got == {0: [0], 1: [1, 2], 2: [3]}, got
EOF
}
case_run "pp3 follows PaddleNLP's pipe segmentation" pp3_layers

# --strategy: a Galvatron strategy file as the target.
strategy() {
    printf '{"pp_size": 2, "tp_size_list": [2, 2, 2, 2], "dp_size_list": [1, 1, 1, 1]}\n' >"$OUT/strategy.json"
    ckpt reshard "$PD/fp32_tp1" "$OUT/strategy" --strategy "$OUT/strategy.json" -q
    same_layout "$OUT/strategy" "$PD/fp32_tp2pp2"
    printf '{"pp_size": 2, "tp_size_list": [2, 4, 2, 2]}\n' >"$OUT/uneven.json"
    mkdir -p "$OUT/uneven"
    expect_refusal "$OUT/uneven" "$OUT/uneven.log" "per-layer TP sizes are not supported" -- \
        "$CKPTCONV" reshard "$PD/fp32_tp1" "$OUT/uneven" --strategy "$OUT/uneven.json"
}
case_run "--strategy (Galvatron JSON) = --tp 2 --pp 2; per-layer sizes refused" strategy

# Sharding stage 1 writes optimizer.shardNN.pdopt per sharding rank, each with the states of
# the parameters that rank owns (and LR_Scheduler): split here from the single-card state the
# way paddle.save writes a state dict (pickle protocol 4 of the same objects).
sharded_optimizer() {
    mkdir -p "$OUT/sharded"
    cp "$PD/fp32_tp1/model_state.pdparams" "$PD/fp32_tp1/config.json" "$OUT/sharded/"
    "$VENV_PYTHON" - "$PD/fp32_tp1/optimizer.pdopt" "$OUT/sharded" <<'EOF2'
import pickle, sys
state = pickle.load(open(sys.argv[1], "rb"), encoding="latin1")
table = state.pop("StructuredToParameterName@@")
params = sorted({k.rsplit("_", 2)[0] for k in state if k != "LR_Scheduler"})
for rank in range(2):
    mine = set(params[rank::2])
    part = {k: v for k, v in state.items() if k == "LR_Scheduler" or k.rsplit("_", 2)[0] in mine}
    part["StructuredToParameterName@@"] = {k: table[k] for k in part if k in table}
    with open(f"{sys.argv[2]}/optimizer.shard{rank:02d}.pdopt", "wb") as f:
        pickle.dump(part, f, protocol=4)
EOF2
    ckpt reshard "$OUT/sharded" "$OUT/sharded_tp1" -q
    queue pd "sharding ranks merged: optimizer.pdopt" raw_equal "$PD/fp32_tp1/optimizer.pdopt" \
        "$OUT/sharded_tp1/optimizer.pdopt"
}
case_run "optimizer.shard00/01.pdopt (sharding stage 1) merge into one" sharded_optimizer

# save_sharded_model (sharding stage 1): each sharding rank's model file holds the parameters
# it owns, and none that has a master weight; model_meta.json names them all. fp32: the union
# is the model. bf16: every parameter comes back from its master weight cast to bfloat16,
# rounded to nearest even as PaddleNLP's _recover_params_from_master_weights does on the GPU
# (paddle 2.6's CPU cast truncates, which is how the bf16 fixtures' own parameters were made).
sharded_model() {
    local f
    ckpt reshard "$PD/fp32_tp2_shard2" "$OUT/shard_fp32" -q
    same_layout "$OUT/shard_fp32" "$PD/fp32_tp2"
    ckpt reshard "$PD/bf16_tp2_shard2" "$OUT/shard_bf16" --tp 1 --pp 2 -q
    for f in optimizer.pp00.pdopt optimizer.pp01.pdopt; do
        queue pd "sharded bf16 -> pp2: $f" raw_equal "$PD/bf16_pp2/$f" "$OUT/shard_bf16/$f"
    done
    [ ! -e "$OUT/shard_bf16/model_meta.json" ]
    "$VENV_PYTHON" - "$OUT/shard_bf16" <<'EOF2'
import pickle, sys
import numpy as np
d = sys.argv[1]
for s in range(2):
    model = pickle.load(open(f"{d}/model_state.pp{s:02d}.pdparams", "rb"), encoding="latin1")
    opt = pickle.load(open(f"{d}/optimizer.pp{s:02d}.pdopt", "rb"), encoding="latin1")
    table = model.pop("StructuredToParameterName@@")
    assert len(model) == len(table) and model, (len(model), len(table))
    for k, p in model.items():
        u = opt["master_weights"][table[k]][1].view(np.uint32)
        rne = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        assert p.dtype == np.uint16 and np.array_equal(p, rne), k
EOF2
}
case_run "sharded model files (save_sharded_model, model_meta.json): fp32 union, bf16 from master weights" sharded_model

no_optimizer() {
    ckpt reshard "$PD/bf16_tp2" "$OUT/noopt" --pp 2 --tp 1 --no-optimizer -q
    [ "$(weights "$OUT/noopt" | tr '\n' ' ')" = "model_state.pp00.pdparams model_state.pp01.pdparams " ]
}
case_run "--no-optimizer writes the model files only" no_optimizer

# The unified checkpoint (safetensors, TP merged, sorted by name) in state-dict order.
unified() {
    local f
    ckpt reshard "$PD/unified_fp32" "$OUT/unified" --tp 2 -q
    for f in model_state.tp00.pdparams model_state.tp01.pdparams; do
        queue pd "unified -> $f" equal "$PD/fp32_tp2/$f" "$OUT/unified/$f"
    done
}
case_run "unified checkpoint -> tp2" unified
run_batch pd

# pd2te with --tp: one pass equals reshard then pd2te; te2pd --tp/--pp brings the tensors back.
pd2te_layout() {
    local f
    ckpt pd2te "$PD/bf16_pp2" "$OUT/te_direct" --tp 2 --pp 1 -q
    ckpt reshard "$PD/bf16_pp2" "$OUT/te_resharded" --tp 2 --pp 1 --no-optimizer -q
    ckpt pd2te "$OUT/te_resharded" "$OUT/te_after" -q
    for f in model_state.tp00.pdparams model_state.tp01.pdparams; do
        cmp "$OUT/te_direct/$f" "$OUT/te_after/$f"
    done
    ckpt te2pd "$OUT/te_direct" "$OUT/te_back" --tp 1 --pp 2 -q
    for f in model_state.pp00.pdparams model_state.pp01.pdparams; do
        queue pd "te2pd --pp 2 -> $f" equal "$PD/bf16_pp2/$f" "$OUT/te_back/$f"
    done
}
case_run "pd2te --tp 2 = reshard + pd2te; te2pd --pp 2 gives the tensors back" pd2te_layout

# Transformer Engine checkpoints reshard too: pd2te then reshard equals pd2te --tp (tensor
# for tensor; the key order follows the source files), and back through te2pd.
te_reshard() {
    local f
    ckpt pd2te "$PD/bf16_pp2" "$OUT/te_pp2" -q
    ckpt reshard "$OUT/te_pp2" "$OUT/te_tp2" --tp 2 --pp 1 -q
    for f in model_state.tp00.pdparams model_state.tp01.pdparams; do
        queue pd "pd2te + reshard --tp 2 = pd2te --tp 2: $f" equal "$OUT/te_direct/$f" "$OUT/te_tp2/$f"
    done
    ckpt reshard "$OUT/te_tp2" "$OUT/te_pp2_again" --tp 1 --pp 2 -q
    ckpt te2pd "$OUT/te_pp2_again" "$OUT/te_pd_again" -q
    for f in model_state.pp00.pdparams model_state.pp01.pdparams; do
        queue pd "TE TP2 -> PP2 -> te2pd: $f" equal "$PD/bf16_pp2/$f" "$OUT/te_pd_again/$f"
    done
}
case_run "a Transformer Engine checkpoint reshards: pd2te then reshard = pd2te --tp 2" te_reshard
run_batch pd

# paddle2hf: PaddleNLP's own logits from the Hugging Face directory; back again.
paddle2hf() {
    ckpt paddle2hf "$PD/fp32_tp2pp2" "$OUT/hf" -q
    hf_py logits "$OUT/hf" "$PD/fp32_tp1/logits.json"
    ckpt hf2paddle "$OUT/hf" "$OUT/hf_back" --tp 2 --pp 2 --fused-ffn -q
    for f in $(weights "$PD/fp32_tp2pp2" | grep model_state); do
        queue pd "hf2paddle -> $f" equal "$PD/fp32_tp2pp2/$f" "$OUT/hf_back/$f"
    done
}
case_run "paddle2hf gives PaddleNLP's logits; hf2paddle --tp 2 --pp 2 gives the files back" paddle2hf

hf_round_trip() {
    ckpt hf2paddle "$TESTDATA/hf/llama_tiny" "$OUT/pd_from_hf" --tp 2 -q
    ckpt paddle2hf "$OUT/pd_from_hf" "$OUT/hf_again" -q
    hf_py logits "$OUT/hf_again" "$TESTDATA/hf/llama_tiny/logits.json"
    queue st "HF -> Paddle TP2 -> HF keeps every tensor" same_tensors "$TESTDATA/hf/llama_tiny" "$OUT/hf_again"
}
case_run "HF -> Paddle (TP 2) -> HF: transformers' logits, every tensor" hf_round_trip
run_batch pd
run_batch st

# Refusals: the error names the file and the reason; nothing is written.
refusals() {
    mkdir -p "$OUT/refused" "$OUT/broken"
    cp "$PD/fp32_tp2/"* "$OUT/broken/"
    rm "$OUT/broken/model_state.tp01.pdparams"
    expect_refusal "$OUT/refused" "$OUT/r1.log" "no model file for TP rank 1" -- \
        "$CKPTCONV" reshard "$OUT/broken" "$OUT/refused" --tp 1
    expect_refusal "$OUT/refused" "$OUT/r2.log" "4 attention heads cannot be split over 3 tensor-parallel ranks" -- \
        "$CKPTCONV" reshard "$PD/fp32_tp1" "$OUT/refused" --tp 3
    expect_refusal "$OUT/refused" "$OUT/r3.log" "--vpp" "Megatron checkpoints only" -- \
        "$CKPTCONV" reshard "$PD/fp32_tp1" "$OUT/refused" --vpp 2
}
case_run "refusals name the reason and leave nothing" refusals

finish
