#!/usr/bin/env bash
# Regenerates testdata/megatron/<layout>/ with Megatron-LM's own training code on the CPU (gloo),
# then checks every layout against the others and writes <layout>/expected.json and
# gpt2style_tp2/logits.json; also testdata/hf/llama_tiny/ (transformers).
# See testdata/gen/README_megatron.md.
#
#   MCORE_PYTHON=/path/to/venv/bin/python MEGATRON_LM=/path/to/Megatron-LM \
#       testdata/gen/run_megatron.sh               # everything (about 10 minutes on 2 cores)
#   ... run_megatron.sh describe                   # only the checks + expected.json (needs WORK=)
#   ... run_megatron.sh dist                       # only the torch_dist twins dist_* (and the
#                                                  # plain DCP fixture testdata/dcp/), from a fresh tp1
#   DIST_TAG=215 DIST_LAYOUTS="dist_tp1 dist_tp2" ... run_megatron.sh dist
#                                                  # the same with another torch: dist215_tp1,
#                                                  # dist215_tp2 and testdata/dcp215/ beside them
#   ... run_megatron.sh distopt                    # the distributed-optimizer fixtures
#                                                  # testdata/megatron/distopt/ (README_megatron_distopt.md);
#                                                  # DISTOPT_TAG=t210_ DISTOPT_CONFIGS=... for the torch 2.10 set
#   ... run_megatron.sh distopt-oracle             # Megatron's own reshard of them: distopt/oracle.json
#   ... run_megatron.sh moe-logits                 # megatron-core's forward of the MoE fixture:
#                                                  # distopt/m_tp1pp1dp2_ep2/logits.json
#   ... run_megatron.sh moe-shared                 # a MoE model with a shared expert and its
#                                                  # logits: testdata/megatron/moe_shared_tp1/
#   ... run_megatron.sh load-ours-moe CKPTCONV     # megatron-core's load of ckptconv's torch_dist
#                                                  # MoE output at EP 1 and 4: load_ours_moe_ep.log
#   ... run_megatron.sh load-ours CKPTCONV         # megatron-core's load_checkpoint of
#                                                  # `ckptconv reshard tp2 --to torch_dist` at TP1 and
#                                                  # TP2 PP2; log in testdata/gen/load_ours_dist.log
#
# MCORE_PYTHON: torch 2.10.0 (2.15.0 for DIST_TAG=215), megatron-core 0.16.1, transformers, safetensors, numpy<2, six.
# MEGATRON_LM: a checkout of NVIDIA/Megatron-LM at tag core_v0.16.1 (commit 55ac7082517c);
#   only megatron/{training,legacy,post_training,rl}, gpt_builders.py and model_provider.py
#   are used, on top of the installed megatron-core wheel (same sources as the tag).
set -euo pipefail

PY=${MCORE_PYTHON:?set MCORE_PYTHON to the Python that has torch and megatron-core 0.16.1}
MLM=${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout at tag core_v0.16.1}
GEN_DIR=$(cd "$(dirname "$0")" && pwd)
TESTDATA=$(cd "$GEN_DIR/.." && pwd)
OUT=${MEGATRON_OUT:-$TESTDATA/megatron}      # override these (and DCP_OUT) to regenerate elsewhere
HF_OUT=${HF_OUT:-$TESTDATA/hf/llama_tiny}
DIST_TAG=${DIST_TAG:-}                      # dist_* are copied as dist${DIST_TAG}_*, dcp as dcp${DIST_TAG}
DIST_LAYOUTS=${DIST_LAYOUTS:-dist_tp1 dist_tp2 dist_tp2_bf16}
DCP=${DCP_OUT:-$TESTDATA/dcp$DIST_TAG}
KEEP_WORK=${WORK:-}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$OUT" "$WORK"
[ -n "$KEEP_WORK" ] || trap 'rm -rf "$WORK"' EXIT

# megatron/training & co. from the checkout, megatron/core from the wheel (namespace package)
OVERLAY=$WORK/overlay
mkdir -p "$OVERLAY/megatron"
for d in training legacy post_training rl; do ln -sfn "$MLM/megatron/$d" "$OVERLAY/megatron/$d"; done
for f in gpt_builders.py model_provider.py; do ln -sf "$MLM/$f" "$OVERLAY/$f"; done
export PYTHONPATH=$OVERLAY:$GEN_DIR
export OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo PYTHONHASHSEED=0 CUDA_VISIBLE_DEVICES= CUDA_DEVICE_MAX_CONNECTIONS=1
export MEGATRON_OVERLAY=$OVERLAY

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# train LAYOUT NPROC [gen_megatron.py train options]
train() {
    local layout=$1 n=$2 dest=$1
    case $layout in dist_*) dest=dist${DIST_TAG}_${layout#dist_} ;; esac
    shift 2
    echo "== $layout: $n processes"
    rm -rf "${WORK:?}/$layout"
    case $layout in tp1) rm -rf "$WORK/ref_dist" ;; ref512) rm -rf "$WORK/ref512_dist" ;; esac
    if ! (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node "$n" \
            --master_addr 127.0.0.1 --master_port "$(free_port)" \
            "$GEN_DIR/gen_megatron.py" train --layout "$layout" "$@") >"$WORK/$layout.log" 2>&1; then
        grep -v -e '^\[Gloo\]' -e 'warn' "$WORK/$layout.log" | tail -40
        echo "$layout failed (log: $WORK/$layout.log)" >&2
        return 1
    fi
    "$PY" -c 'import json, sys; [print("   ", c) for c in json.load(open(sys.argv[1]))["checks"]]' \
        "$WORK/$layout.meta.rank0.json"
    case $layout in
        ref512|gpt2style_tp1|hf_llama_tiny_tp1|load_ours_*|tp1_optim) ;;
        tp1) [ "$MODE" != all ] || { rm -rf "${OUT:?}/tp1"; cp -r "$WORK/tp1" "$OUT/tp1"; } ;;
        *) rm -rf "${OUT:?}/$dest"; cp -r "$WORK/$layout" "$OUT/$dest" ;;
    esac
}

MODE=${1:-all}
if [ "$MODE" = distopt ]; then
    # README_megatron_distopt.md: training with the distributed optimizer, three saved forms
    DO_OUT=${DISTOPT_OUT:-$OUT/distopt}
    DO_TAG=${DISTOPT_TAG:-}
    DO_CONFIGS=${DISTOPT_CONFIGS:-a_tp1pp1dp1 a_tp2pp1dp2_buckets a_tp1pp2dp2 b_tp2pp2dp1_bf16_tied c_tp1pp2dp1_vpp2 m_tp1pp1dp2_ep2 a_tp2pp1dp1_plain f_tp1pp1dp3_fp16_inst3}
    mkdir -p "$DO_OUT"
    for c in $DO_CONFIGS; do
        n=$("$PY" -c 'import sys, gen_megatron_distopt as g; c = g.layout_of(g.CONFIGS[sys.argv[1]]); print(c["tp"] * c["pp"] * c["dp"])' "$c")
        echo "== $c: $n processes"
        rm -rf "${WORK:?}/$c"
        if ! (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node "$n" \
                --master_addr 127.0.0.1 --master_port "$(free_port)" \
                "$GEN_DIR/gen_megatron_distopt.py" train --config "$c") >"$WORK/$c.log" 2>&1; then
            grep -v -e '^\[Gloo\]' -e 'warn' "$WORK/$c.log" | tail -40
            echo "$c failed (log: $WORK/$c.log)" >&2
            exit 1
        fi
        rm -rf "${DO_OUT:?}/$DO_TAG$c"
        mkdir -p "$DO_OUT/$DO_TAG$c"
        # the forms committed (the MoE fixture: legacy and dp_reshardable; gen_megatron_distopt.forms_kept)
        for f in $("$PY" -c 'import sys, gen_megatron_distopt as g; print(*g.forms_kept(g.layout_of(g.CONFIGS[sys.argv[1]])))' "$c"); do
            cp -r "$WORK/$c/$f" "$DO_OUT/$DO_TAG$c/$f"
        done
    done
    # shellcheck disable=SC2086
    "$PY" "$GEN_DIR/gen_megatron_distopt.py" describe "$WORK" "$DO_OUT" $DO_CONFIGS --tag "$DO_TAG"
    du -sh "$DO_OUT"/"$DO_TAG"*
    exit 0
fi
if [ "$MODE" = distopt-oracle ]; then
    # needs the WORK of a `distopt` run (WORK=dir run_megatron.sh distopt)
    [ -n "$KEEP_WORK" ] || { echo "set WORK to the work directory of a distopt run" >&2; exit 2; }
    DO_OUT=${DISTOPT_OUT:-$OUT/distopt}
    mkdir -p "$WORK/oracle"
    DO_ORACLE=${DISTOPT_ORACLE:-oracle.json}     # oracle_moe.json: the MoE fixture's pairs
    # a pair may also save its target's model alone: the fixture testdata/megatron/<model_only>
    "$PY" "$GEN_DIR/gen_megatron_distopt.py" oracle-pairs --set "$DO_ORACLE" | while read -r src dst model_only; do
        n=$("$PY" "$GEN_DIR/gen_megatron_distopt.py" world "$dst")
        echo "== oracle $src -> $dst: $n processes"
        rm -rf "$WORK/oracle/${src}__to__$dst" "$WORK/oracle/model_only"
        mo=()
        [ "$model_only" = - ] || mo=(--model-only "oracle/model_only")
        if ! (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node "$n" \
                --master_addr 127.0.0.1 --master_port "$(free_port)" \
                "$GEN_DIR/gen_megatron_distopt.py" reshard --config "$src" --target "$dst" "${mo[@]}") \
                >"$WORK/oracle/${src}__to__$dst.log" 2>&1; then
            grep -v -e '^\[Gloo\]' -e 'warn' "$WORK/oracle/${src}__to__$dst.log" | tail -40
            echo "$src -> $dst failed" >&2
            exit 1
        fi
        if [ "$model_only" != - ]; then
            rm -rf "${OUT:?}/$model_only"
            cp -r "$WORK/oracle/model_only" "$OUT/$model_only"
        fi
    done
    "$PY" "$GEN_DIR/gen_megatron_distopt.py" oracle "$WORK" "$DO_OUT" --set "$DO_ORACLE"
    exit 0
fi
if [ "$MODE" = moe-logits ]; then
    DO_OUT=${DISTOPT_OUT:-$OUT/distopt}
    (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node 1 --master_addr 127.0.0.1 \
        --master_port "$(free_port)" "$GEN_DIR/gen_megatron_moe_logits.py" \
        "$DO_OUT/m_tp1pp1dp2_ep2/dp_reshardable" "$DO_OUT/m_tp1pp1dp2_ep2/logits.json") >"$WORK/moe_logits.log" 2>&1 ||
        { grep -v -e '^\[Gloo\]' -e 'warn' "$WORK/moe_logits.log" | tail -40; exit 1; }
    exit 0
fi
if [ "$MODE" = moe-shared ]; then
    rm -rf "${OUT:?}/moe_shared_tp1"
    (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node 1 --master_addr 127.0.0.1 \
        --master_port "$(free_port)" "$GEN_DIR/gen_megatron_moe_shared.py" "$OUT/moe_shared_tp1") \
        >"$WORK/moe_shared.log" 2>&1 || { grep -v -e '^\[Gloo\]' -e 'warn' "$WORK/moe_shared.log" | tail -40; exit 1; }
    exit 0
fi
if [ "$MODE" = load-ours-moe ]; then
    # megatron-core's load of ckptconv's torch_dist (fully_reshardable) output of the MoE fixture
    # at EP 1 and EP 4, saved legacy, against its own reshards (oracle_moe.json)
    CK=${2:?give the ckptconv binary}
    DO_OUT=${DISTOPT_OUT:-$OUT/distopt}
    {
        for spec in "tp1pp1dp2ep1 1 2" "tp1pp1dp4ep4 4 4"; do
            read -r tgt ep dp <<<"$spec"
            rm -rf "$WORK/ours_$tgt" "$WORK/oracle/m_tp1pp1dp2_ep2__to__$tgt"
            mkdir -p "$WORK/oracle"
            echo "ckptconv reshard m_tp1pp1dp2_ep2/legacy ours_$tgt --tp 1 --pp 1 --ep $ep --dp $dp --to torch_dist --optim-format fully_reshardable"
            "$CK" reshard -q "$DO_OUT/m_tp1pp1dp2_ep2/legacy" "$WORK/ours_$tgt" --tp 1 --pp 1 --ep "$ep" --dp "$dp" \
                --to torch_dist --optim-format fully_reshardable
            echo "megatron-core $("$PY" -c 'import megatron.core as m; print(m.__version__)' 2>/dev/null) at $tgt: load_checkpoint of ours_$tgt, save_checkpoint --ckpt-format torch"
            (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node "$dp" --master_addr 127.0.0.1 \
                --master_port "$(free_port)" "$GEN_DIR/gen_megatron_distopt.py" reshard --config m_tp1pp1dp2_ep2 \
                --target "$tgt" --source "ours_$tgt") >"$WORK/load_ours_$tgt.log" 2>&1 ||
                { grep -v -e '^\[Gloo\]' -e 'warn' "$WORK/load_ours_$tgt.log" | tail -40; exit 1; }
            "$PY" - "$DO_OUT/oracle_moe.json" "$tgt" "$WORK/oracle/m_tp1pp1dp2_ep2__to__$tgt" <<'PY'
import json, sys
import distopt_hashes as dh
pair = [p for p in json.load(open(sys.argv[1]))["pairs"] if p["target"] == sys.argv[2]][0]
ours = dh.describe_dir(sys.argv[3])
n = bad = 0
for rel, want in pair["files"].items():
    got = ours["files"].get(rel, {"tensors": {}, "values": {}})
    for k, rec in want["tensors"].items():
        n += 1
        bad += got["tensors"].get(k) != rec
    bad += sum(got["values"].get(k) != v for k, v in want["values"].items() if not k.startswith("rerun_state_machine"))
print(f"its files against oracle_moe.json {sys.argv[2]}: {n} tensors and the values compared, {bad} differ; "
      f"same files: {sorted(ours['files']) == sorted(pair['files'])}")
PY
        done
    } | tee "$GEN_DIR/load_ours_moe_ep.log"
    exit 0
fi
if [ "$MODE" = load-ours ]; then
    CK=${2:?give the ckptconv binary}
    R=(--ref-full tp1_full.pt)
    train tp1 1
    rm -rf "$WORK/ours_dist"
    "$CK" reshard "$TESTDATA/megatron/tp2" "$WORK/ours_dist" --tp 2 --pp 1 --to torch_dist --no-optimizer
    {
        echo "ckptconv reshard testdata/megatron/tp2 ours_dist --tp 2 --pp 1 --to torch_dist --no-optimizer"
        echo "then megatron-core $("$PY" -c 'import megatron.core as m; print(m.__version__)' 2>/dev/null) load_checkpoint (torch_dist) of ours_dist:"
        train load_ours_tp1 1 "${R[@]}"
        train load_ours_tp2pp2 4 "${R[@]}"
    } | tee "$GEN_DIR/load_ours_dist.log"
    exit 0
fi
if [ "$MODE" = dist ]; then
    # tp1 makes ref_dist and tp1_full.pt; its legacy files are not copied again
    R=(--ref-full tp1_full.pt)
    train tp1 1
    for layout in $DIST_LAYOUTS; do
        case $layout in dist_tp1) train "$layout" 1 "${R[@]}" ;; *) train "$layout" 2 "${R[@]}" ;; esac
    done
    rm -rf "$DCP"
    (cd "$WORK" && "$PY" -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 \
        --master_port "$(free_port)" "$GEN_DIR/gen_dcp.py" "$DCP") >"$WORK/dcp.log" 2>&1 ||
        { tail -40 "$WORK/dcp.log"; exit 1; }
    "$PY" "$GEN_DIR/gen_dcp.py" --describe "$DCP"
    if [ -z "$DIST_TAG" ]; then
        rm -rf "$TESTDATA/bad_dcp"
        "$PY" "$GEN_DIR/gen_dcp.py" --hostile "$DCP" "$TESTDATA/bad_dcp"
    fi
    du -sh "$OUT"/dist"$DIST_TAG"_* "$DCP"
    exit 0
fi
if [ "$MODE" = all ]; then
    "$PY" "$GEN_DIR/gen_hf_llama.py" "$HF_OUT"
    I=(--init-full tp1_init_full.pt)
    R=(--ref-full tp1_full.pt)
    train tp1 1
    train ref512 1 "${R[@]}"
    train tp2 2 "${I[@]}" "${R[@]}"
    train pp2 2 "${R[@]}"
    train tp2pp2 4 "${R[@]}"
    train tp4_ng2 4 "${R[@]}"
    train tp2_bf16 2 "${I[@]}" "${R[@]}"
    train pp2_vpp2 2 "${R[@]}"
    train tp1_optim 1 "${I[@]}" "${R[@]}"
    train tp2_optim 2 "${I[@]}" "${R[@]}"
    train tp2pp2_bf16_optim 4 "${R[@]}"
    train gpt2style_tp1 1
    train gpt2style_tp2 2 --init-full gpt2style_tp1_init_full.pt --ref-full gpt2style_tp1_full.pt
    train hf_llama_tiny_tp1 1 --hf-dir "$HF_OUT"
fi
"$PY" "$GEN_DIR/gen_megatron.py" describe "$WORK" "$OUT" --hf-dir "$HF_OUT"
du -sh "$OUT" "$HF_OUT"
