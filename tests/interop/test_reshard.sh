#!/usr/bin/env bash
# `ckptconv reshard`, `hf2mcore` and `mcore2hf` on checkpoints megatron-core and transformers
# wrote (testdata/megatron, testdata/hf; testdata/gen/README_megatron.md):
#  - every layout to every other equals the files megatron-core itself wrote at that layout,
#    bit for bit (TP1, TP2, PP2, TP2 PP2, PP2 VPP2; TP4 with fewer query groups than ranks);
#  - the optimizer state (Adam moments, fp32 masters) resharded equals megatron-core's at the
#    other layout, and round trips through other layouts give back every tensor and value;
#  - SwiGLU linear_fc1 is cut per rank as [gate_r; up_r], not naively (Megatron-LM#360);
#  - mcore2hf's output, run through a forward pass written in the test, gives Megatron's own
#    logits; HF -> Megatron (any layout) -> HF gives back the input files byte for byte;
#  - refusals leave nothing behind; malformed rank files are refused, naming the file.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch
need_venv "numpy, safetensors"

MT="$TESTDATA/megatron"
HF="$TESTDATA/hf/llama_tiny"
OUT="$WORK/out"
mkdir -p "$OUT"

mcore_py() { "$TORCH_PYTHON" "$INTEROP_DIR/mcore_check.py" "$@"; }
hf_py() { "$VENV_PYTHON" "$INTEROP_DIR/hf_llama_check.py" "$@"; }

# layout NAME: "--tp N --pp M --vpp K" of a fixture
layout() {
    case "$1" in
        tp1) echo "--tp 1 --pp 1 --vpp 1" ;;
        tp2 | tp2_bf16 | gpt2style_tp2) echo "--tp 2 --pp 1 --vpp 1" ;;
        pp2) echo "--tp 1 --pp 2 --vpp 1" ;;
        tp2pp2 | tp2pp2_bf16_optim) echo "--tp 2 --pp 2 --vpp 1" ;;
        pp2_vpp2) echo "--tp 1 --pp 2 --vpp 2" ;;
        tp4_ng2) echo "--tp 4 --pp 1 --vpp 1" ;;
    esac
}

# reshard FROM TO_LAYOUT_NAME OUTDIR [extra flags]
reshard() {
    local from="$1" to="$2" dir="$3"
    shift 3
    # shellcheck disable=SC2046
    ckpt reshard "$MT/$from" "$dir" $(layout "$to") -q "$@"
}

# Every layout of the same model to every other: megatron-core's own files at the target.
LAYOUTS=(tp1 tp2 pp2 tp2pp2 pp2_vpp2)
for from in "${LAYOUTS[@]}"; do
    for to in "${LAYOUTS[@]}"; do
        [ "$from" = "$to" ] && continue
        case_run "reshard $from -> $to" reshard "$from" "$to" "$OUT/$from-$to"
        queue mcore "$from -> $to equals megatron-core's $to" same "$OUT/$from-$to" "$MT/$to"
    done
done

# Fewer query groups (2) than ranks (4): the QKV rows are cut contiguously through the groups.
# The TP4 vocabulary is padded to 512 rows; megatron-core fills the new rows at random, we
# write zeros, so only the 201 true rows (200 tokens and the NullTokenizer's end-of-document) are compared.
case_run "reshard tp1 -> tp4 (ng 2 < TP 4)" reshard tp1 tp4_ng2 "$OUT/tp1-tp4"
queue mcore "tp1 -> tp4 equals megatron-core's tp4_ng2" same "$OUT/tp1-tp4" "$MT/tp4_ng2" vocab=201
queue mcore "tp1 -> tp4 args" args "$OUT/tp1-tp4" 4 1 1 512
for to in tp1 tp2 tp2pp2; do
    case_run "reshard tp4_ng2 -> $to" reshard tp4_ng2 "$to" "$OUT/tp4-$to"
    queue mcore "tp4_ng2 -> $to equals megatron-core's $to" same "$OUT/tp4-$to" "$MT/$to"
done

# Optimizer state: moments and masters resharded with their parameters. The fp32 TP2 fixture
# with the non-distributed optimizer (FP32Optimizer) is the distopt set's tiny plain one
# (README_megatron_distopt.md); its layouts' Megatron reshard is checked in test_reshard_distopt.
OPT="$MT/distopt/a_tp2pp1dp1_plain/legacy"
case_run "reshard the fp32 TP2 optimizer fixture -> tp1 -> tp2" \
    sh -c "'$CKPTCONV' reshard '$OPT' '$OUT/optim-tp1' --tp 1 --pp 1 -q &&
           '$CKPTCONV' reshard '$OUT/optim-tp1' '$OUT/optim-tp2' --tp 2 --pp 1 -q"
queue mcore "fp32 TP2 -> tp1 -> tp2 equals megatron-core's TP2 files, optimizer included" \
    same "$OUT/optim-tp2" "$OPT" optim
case_run "reshard the fp32 TP2 optimizer fixture -> TP2 PP2 -> TP2" \
    sh -c "'$CKPTCONV' reshard '$OPT' '$OUT/rt1a' --tp 2 --pp 2 -q &&
           '$CKPTCONV' reshard '$OUT/rt1a' '$OUT/rt1' --tp 2 --pp 1 -q"
queue mcore "TP2 -> TP2 PP2 -> TP2 gives back everything (optimizer)" roundtrip "$OUT/rt1" "$OPT"
# (the optimizer fixture was saved without rng states: those of tp2 make the same round trip)
case_run "reshard tp2 -> TP2 PP2 -> TP2" \
    sh -c "'$CKPTCONV' reshard '$MT/tp2' '$OUT/rt0a' --tp 2 --pp 2 -q &&
           '$CKPTCONV' reshard '$OUT/rt0a' '$OUT/rt0' --tp 2 --pp 1 -q"
queue mcore "TP2 -> TP2 PP2 -> TP2 gives back everything (rng included)" roundtrip "$OUT/rt0" "$MT/tp2"
case_run "reshard tp2pp2_bf16_optim -> TP4 PP1 -> TP2 PP2" \
    sh -c "'$CKPTCONV' reshard '$MT/tp2pp2_bf16_optim' '$OUT/rt2a' --tp 4 --pp 1 -q &&
           '$CKPTCONV' reshard '$OUT/rt2a' '$OUT/rt2' --tp 2 --pp 2 -q"
queue mcore "bf16 TP2 PP2 -> TP4 PP1 -> TP2 PP2 gives back every tensor, fp32 masters included" \
    roundtrip "$OUT/rt2" "$MT/tp2pp2_bf16_optim" norng
queue mcore "TP4 PP1 args" args "$OUT/rt2a" 4 1 1 512
case_run "reshard tp2_bf16 -> TP1 -> TP2" \
    sh -c "'$CKPTCONV' reshard '$MT/tp2_bf16' '$OUT/rt3a' --tp 1 -q && '$CKPTCONV' reshard '$OUT/rt3a' '$OUT/rt3' --tp 2 -q"
queue mcore "bf16 TP2 -> TP1 -> TP2 gives back everything but rank 1's rng (no rank 1 at TP1)" \
    roundtrip "$OUT/rt3" "$MT/tp2_bf16" norng

# GPT-2 style: LayerNorm with biases, linear biases, learned positions, QK layernorm, tied
# embeddings (PP 2: the last stage gets the output layer's copy; back at PP 1 it goes).
case_run "reshard gpt2style_tp2 -> TP1 PP2 -> TP2" \
    sh -c "'$CKPTCONV' reshard '$MT/gpt2style_tp2' '$OUT/rt4a' --tp 1 --pp 2 -q &&
           '$CKPTCONV' reshard '$OUT/rt4a' '$OUT/rt4' --tp 2 --pp 1 -q"
queue mcore "gpt2style TP2 -> TP1 PP2 -> TP2 gives back everything" roundtrip "$OUT/rt4" "$MT/gpt2style_tp2" norng
case_run "tied embeddings at PP 2: the last stage holds output_layer.weight" \
    "$TORCH_PYTHON" -c "
import sys; sys.path.insert(0, '$INTEROP_DIR')
import mcore_check as m, torch
first = m.load('$OUT/rt4a/iter_0000010/mp_rank_00_000/model_optim_rng.pt')['model']
last = m.load('$OUT/rt4a/iter_0000010/mp_rank_00_001/model_optim_rng.pt')['model']
assert 'output_layer.weight' not in first and 'embedding.word_embeddings.weight' not in last
assert torch.equal(last['output_layer.weight'], first['embedding.word_embeddings.weight'])"

# MoE: experts stay on their expert-parallel rank, cut over TP like dense layers. A synthetic
# checkpoint (Megatron's names and layout, made here): no real MoE fixture yet.
case_run "make a synthetic MoE checkpoint (EP 2)" mcore_py moe_make "$WORK/moe"
case_run "reshard MoE EP 2 -> TP 2 (EP kept)" ckpt reshard "$WORK/moe" "$OUT/moe-tp2" --tp 2 -q
queue mcore "MoE experts per EP rank, cut per TP rank" moe_check "$OUT/moe-tp2" "$WORK/moe"

queue mcore "a naive dim-0 chunk of linear_fc1 is not megatron-core's TP2 shard; ours is" \
    naive_fc1 "$MT/tp1" "$MT/tp2"

# Megatron's args and the model-only mode.
case_run "--no-optimizer leaves out optimizer and scheduler" sh -c "
    '$CKPTCONV' reshard '$OPT' '$OUT/noopt' --tp 2 --no-optimizer -q &&
    '$TORCH_PYTHON' -c \"
import sys; sys.path.insert(0, '$INTEROP_DIR')
import mcore_check as m
d = m.load('$OUT/noopt/iter_0000003/mp_rank_01/model_optim_rng.pt')
assert 'optimizer' not in d and 'opt_param_scheduler' not in d and 'model' in d, list(d)\""
case_run "--extra-state empty and drop" sh -c "
    '$CKPTCONV' reshard '$MT/tp1' '$OUT/xe' --tp 2 --extra-state empty -q &&
    '$CKPTCONV' reshard '$MT/tp1' '$OUT/xd' --tp 2 --extra-state drop -q &&
    '$TORCH_PYTHON' -c \"
import sys; sys.path.insert(0, '$INTEROP_DIR')
import mcore_check as m, torch
e = m.load('$OUT/xe/iter_0000010/mp_rank_00/model_optim_rng.pt')['model']
d = m.load('$OUT/xd/iter_0000010/mp_rank_00/model_optim_rng.pt')['model']
xs = [k for k in e if k.endswith('._extra_state')]
assert xs and all(isinstance(e[k], torch.Tensor) and e[k].dtype == torch.uint8 and e[k].numel() == 0 for k in xs)
assert not [k for k in d if k.endswith('._extra_state')]\""

# Refusals: nothing is written.
mkdir -p "$OUT/empty"
cp -r "$MT/tp1" "$WORK/distrib"
touch "$WORK/distrib/iter_0000010/mp_rank_00/distrib_optim.pt"
case_run "a distrib_optim.pt that is not one is refused, naming it" \
    expect_refusal "$OUT/empty" "$WORK/err1" "mp_rank_00/distrib_optim.pt" "unrecognized checkpoint format" -- \
    "$CKPTCONV" reshard "$WORK/distrib" "$OUT/empty/x" --tp 2
case_run "layers that do not split over the stages are refused" \
    expect_refusal "$OUT/empty" "$WORK/err2" "4 layers do not split evenly over 3 pipeline stages" -- \
    "$CKPTCONV" reshard "$MT/tp1" "$OUT/empty/x" --pp 3
rm -rf "$WORK/missing"
cp -r "$MT/tp2pp2" "$WORK/missing"
rm -r "$WORK/missing/iter_0000010/mp_rank_01_001"
case_run "a missing rank directory is refused" \
    expect_refusal "$OUT/empty" "$WORK/err3" "no mp_rank_01_001" -- \
    "$CKPTCONV" reshard "$WORK/missing" "$OUT/empty/x" --tp 1

# Malformed values where reshard expects a Namespace, a dict or one tensor: an error naming
# the file, never a crash. Copies of the fp32 TP2 optimizer fixture are rewritten through mcore_check's stand-ins;
# the one rewritten unchanged must still reshard.
corrupted_copies() {
    local how
    for how in none args_int state_list nul_key; do
        rm -rf "${WORK:?}/$how"
        cp -r "$OPT" "$WORK/$how"
    done
    mcore_py corrupt "$WORK/none" none
    mcore_py corrupt "$WORK/args_int" args_int 1
    mcore_py corrupt "$WORK/state_list" state_list
    mcore_py corrupt "$WORK/nul_key" nul_key
}
case_run "malformed copies of the fp32 TP2 optimizer fixture" corrupted_copies
case_run "the copy rewritten unchanged reshards" ckpt reshard "$WORK/none" "$OUT/none" --tp 1 -q
case_run "args that are not a Namespace (rank 1) are refused, naming the file" \
    expect_refusal "$OUT/empty" "$WORK/err4" "mp_rank_01" "args is not a Namespace" -- \
    "$CKPTCONV" reshard "$WORK/args_int" "$OUT/empty/x" --tp 2
case_run "an optimizer state entry that is not a dict is refused, naming the file" \
    expect_refusal "$OUT/empty" "$WORK/err5" "model_optim_rng.pt" "is not a dict" -- \
    "$CKPTCONV" reshard "$WORK/state_list" "$OUT/empty/x" --tp 1
case_run "a model key with a NUL byte is refused, naming the file" \
    expect_refusal "$OUT/empty" "$WORK/err6" "model_optim_rng.pt" "'output_layer.weight' is not a tensor" -- \
    "$CKPTCONV" reshard "$WORK/nul_key" "$OUT/empty/x" --tp 1
rm -rf "$WORK/huge_positions"
cp -r "$MT/tp1" "$WORK/huge_positions"
case_run "args with max_position_embeddings 2^40" mcore_py corrupt "$WORK/huge_positions" huge_positions
case_run "mcore2hf writes no config.json value out of range (args' max_position_embeddings 2^40)" \
    expect_refusal "$OUT/empty" "$WORK/err7" "config.json made from the args of" \
    "max_position_embeddings is 1099511627776" -- "$CKPTCONV" mcore2hf "$WORK/huge_positions" "$OUT/empty/x"

# Sets that disagree with their own args: refused at open (reshard, inspect, mcore2hf alike),
# naming the file, the tensor or the field.
disagreeing_copies() {
    local how
    for how in qkv_rows no_fc2 no_fc2_rank1 args_hidden; do
        rm -rf "${WORK:?}/$how"
        cp -r "$MT/tp2" "$WORK/$how"
    done
    rm -rf "${WORK:?}/drop_layer"
    cp -r "$MT/pp2" "$WORK/drop_layer"
    mcore_py corrupt "$WORK/qkv_rows" qkv_rows
    mcore_py corrupt "$WORK/no_fc2" no_fc2
    mcore_py corrupt "$WORK/no_fc2_rank1" no_fc2 1
    mcore_py corrupt "$WORK/args_hidden" args_hidden 1
    mcore_py corrupt "$WORK/drop_layer" drop_layer 1
}
case_run "copies of tp2 and pp2 that disagree with their args" disagreeing_copies
case_run "a QKV narrower than args imply is refused, naming the tensor and the fields" \
    expect_refusal "$OUT/empty" "$WORK/err7" "mp_rank_00/model_optim_rng.pt" \
    "'decoder.layers.0.self_attention.linear_qkv.weight' is 96 along axis 0" "num_query_groups 2" -- \
    "$CKPTCONV" reshard "$WORK/qkv_rows" "$OUT/empty/x" --tp 1
case_run "a layer without its linear_fc2 is refused, naming the tensor" \
    expect_refusal "$OUT/empty" "$WORK/err8" "no 'decoder.layers.1.mlp.linear_fc2.weight'" -- \
    "$CKPTCONV" inspect "$WORK/no_fc2"
case_run "a TP rank without a key its rank 0 has is refused, naming the key and both files" \
    expect_refusal "$OUT/empty" "$WORK/err8b" \
    "mp_rank_01/model_optim_rng.pt: no model key decoder.layers.1.mlp.linear_fc2.weight, which TP rank 0" \
    "mp_rank_00/model_optim_rng.pt) has" -- \
    "$CKPTCONV" reshard "$WORK/no_fc2_rank1" "$OUT/empty/x" --tp 1
case_run "rank files whose args disagree are refused, naming both and the field" \
    expect_refusal "$OUT/empty" "$WORK/err9" "mp_rank_01/model_optim_rng.pt: args.hidden_size is 32" \
    "mp_rank_00/model_optim_rng.pt has 64" -- \
    "$CKPTCONV" mcore2hf "$WORK/args_hidden" "$OUT/empty/x"
case_run "a stage short of its layers is refused, naming its file" \
    expect_refusal "$OUT/empty" "$WORK/err10" "mp_rank_00_001/model_optim_rng.pt" \
    "model chunk 0 of pipeline stage 1 holds 1 layers" -- \
    "$CKPTCONV" reshard "$WORK/drop_layer" "$OUT/empty/x" --pp 1

# Megatron -> Hugging Face: Megatron's own logits from a forward pass over our output.
for from in tp1 tp2pp2 pp2_vpp2 tp4_ng2; do
    case_run "mcore2hf $from" ckpt mcore2hf "$MT/$from" "$OUT/hf-$from" -q
    queue hf "mcore2hf $from reproduces megatron-core's logits" logits "$OUT/hf-$from" "$MT/tp1/logits.json"
done
queue hf "mcore2hf config.json" config "$OUT/hf-tp1" 'model_type="llama"' vocab_size=201 \
    num_key_value_heads=2 head_dim=16 rope_theta=10000.0 tie_word_embeddings=false
queue hf "the forward pass reproduces transformers' logits on the HF fixture" logits "$HF" "$HF/logits.json"

# Hugging Face -> Megatron -> Hugging Face: the input files back, byte for byte.
hf_round_trip() {
    local impl="$1" dir="$2"
    shift 2
    ckpt hf2mcore "$HF" "$OUT/$dir-mc" --transformer-impl "$impl" -q "$@"
    ckpt mcore2hf "$OUT/$dir-mc" "$OUT/$dir-hf" --max-shard-size 100KB -q
    local f
    for f in "$HF"/*.safetensors "$HF/model.safetensors.index.json"; do
        cmp "$f" "$OUT/$dir-hf/$(basename "$f")"
    done
}
case_run "HF -> mcore TP2 PP2 (local) -> HF: the same files" hf_round_trip local a --tp 2 --pp 2
case_run "HF -> mcore TP4 (TE names, 2 groups < 4 ranks) -> HF: the same files" hf_round_trip transformer_engine b --tp 4
case_run "HF -> mcore PP2 VPP2 -> HF: the same files" hf_round_trip local c --pp 2 --vpp 2
queue mcore "hf2mcore output loads, args record TP2 PP2" args "$OUT/a-mc" 2 2 1 256
# the tensors Megatron's own forward turned into transformers' logits at fixture time
case_run "hf2mcore TP1 (local)" ckpt hf2mcore "$HF" "$OUT/oracle" --transformer-impl local -q
queue mcore "hf2mcore equals the tensors Megatron's forward checked against transformers" \
    hf_oracle "$OUT/oracle" "$HF/expected.json"
case_run "hf2mcore TE names" sh -c "
    '$CKPTCONV' hf2mcore '$HF' '$OUT/te' --tp 1 -q &&
    '$TORCH_PYTHON' -c \"
import sys; sys.path.insert(0, '$INTEROP_DIR')
import mcore_check as m, torch
d = m.load('$OUT/te/iter_0000001/mp_rank_00/model_optim_rng.pt')
k = list(d['model'])
assert 'decoder.layers.0.self_attention.linear_qkv.layer_norm_weight' in k, k[:8]
assert 'decoder.layers.0.mlp.linear_fc1.layer_norm_weight' in k
assert d['model']['decoder.layers.0.self_attention.linear_qkv._extra_state'].numel() == 0
a = d['args']
assert (a.num_layers, a.hidden_size, a.num_attention_heads, a.num_query_groups, a.ffn_hidden_size,
        a.padded_vocab_size, a.vocab_size, a.swiglu, a.normalization) == (4, 64, 4, 2, 96, 256, 200, True, 'RMSNorm'), vars(a)
assert d['iteration'] == 1 and d['checkpoint_version'] == 3.0\""
# Transformer Engine names through reshard: HF -> mcore TP1 (TE) -> TP2 PP2 -> HF, the same files
case_run "TE layer names through reshard" sh -c "
    '$CKPTCONV' reshard '$OUT/te' '$OUT/te-tp2pp2' --tp 2 --pp 2 -q &&
    '$CKPTCONV' mcore2hf '$OUT/te-tp2pp2' '$OUT/te-back' --max-shard-size 100KB -q &&
    for f in '$HF'/*.safetensors '$HF/model.safetensors.index.json'; do
        cmp \"\$f\" '$OUT/te-back/'\"\$(basename \"\$f\")\"; done"
# the HF model through hf2mcore gives the same logits as the HF model itself
case_run "hf2mcore then mcore2hf keeps transformers' logits" ckpt mcore2hf "$OUT/te" "$OUT/te-hf" -q
queue hf "HF -> mcore -> HF logits" logits "$OUT/te-hf" "$HF/logits.json"

run_batch mcore
run_batch hf
finish
