# verify runs DeepSeek-V3 layers (multi-latent attention, YaRN RoPE, a dense first layer,
# grouped sigmoid routing with the expert bias, a shared expert) from the Hugging Face files of
# testdata/hf/deepseek_v3_tiny (its config's topk_group raised to n_group and rms_norm_eps set to
# 1e-6: hf2mcore refuses a group choice Megatron scores differently and an eps Megatron's MLA
# norms would not share) and from the Megatron checkpoints hf2mcore writes of
# them: TP 1, TP 2 EP 2 (Transformer Engine and local names, the local down projections cut
# over the ranks; the ranks against their merge too) pass. Copies changed at test time fail, exit 1, naming what changed: layer
# 1's experts 1 and 2 swapped (both experts), its expert bias dropped (named) or two of its
# values exchanged (the router's expert bias), two heads of layer 1's q_b_proj or kv_b_proj
# exchanged (the layer and its attention alone, not its router or experts), the dense first
# layer made a MoE layer in config.json (an error naming it); in the Megatron checkpoint, the
# expert bias dropped (named).
edit() { python3 "$CLI_DIR/edit_safetensors.py" "$@"; }
config() { python3 -c 'import json, sys
p = sys.argv[1] + "/config.json"; d = json.load(open(p)); d[sys.argv[2]] = json.loads(sys.argv[3]); json.dump(d, open(p, "w"))' "$@"; }
fails() { ckptconv verify "$@" | grep -E "^layer .*  FAIL$" | sed -E 's/ +[-+0-9.e]+ +[-+0-9.e]+ +[-+0-9.]+  FAIL$/: FAIL/'; }
rm -rf in && cp -r "$TESTDATA/hf/deepseek_v3_tiny" in && chmod -R u+w in
config in topk_group 4
config in rms_norm_eps 1e-6
ckptconv hf2mcore in mc -q || exit 1
ckptconv verify in mc -q
echo "TP 1: exit $?"
for impl in transformer_engine local; do
    ckptconv hf2mcore in "tp2-$impl" --tp 2 --ep 2 --transformer-impl "$impl" -q || exit 1
    ckptconv verify in "tp2-$impl" -q
    echo "TP 2 EP 2 $impl: exit $?"
    ckptconv verify "tp2-$impl" -q
    echo "TP 2 EP 2 $impl, its ranks against their merge: exit $?"
done
ckptconv verify in mc --json | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["pass"], sorted({l.get("part") for l in o["layers"] if l.get("index") == 1} - {None}))
print([n for n in o["notes"] if "differ" in n])'

case_copy() { rm -rf "$1" && cp -r in "$1"; }
W=model.layers.1.mlp
case_copy swapped
for p in gate_proj up_proj down_proj; do edit swapped/model.safetensors swap "$W.experts.1.$p.weight" "$W.experts.2.$p.weight"; done
ckptconv verify swapped mc -q
echo "experts 1 and 2 swapped: exit $?"
fails swapped mc

case_copy nobias
edit nobias/model.safetensors drop "$W.gate.e_score_correction_bias"
ckptconv verify nobias mc -q
echo "expert bias dropped: exit $?"

case_copy bias
edit bias/model.safetensors swap_rows "$W.gate.e_score_correction_bias" 0 5 1
ckptconv verify bias mc -q
echo "expert bias changed: exit $?"
fails bias mc

for proj in q_b_proj:12 kv_b_proj:16; do
    case_copy heads
    edit heads/model.safetensors swap_rows "model.layers.1.self_attn.${proj%:*}.weight" 0 "${proj#*:}" "${proj#*:}"
    ckptconv verify heads mc -q
    echo "${proj%:*} heads 0 and 1 exchanged: exit $?"
    fails heads mc
done

case_copy moe0
config moe0 first_k_dense_replace 0
ckptconv verify moe0 mc -q
echo "first_k_dense_replace 0: exit $?"

# the Megatron side: layer 1's router.expert_bias dropped by a reshard
ckptconv reshard mc nobias-mc --tp 1 --pp 1 --no-optimizer --drop 'decoder.layers.1.mlp.router.expert_bias' -q
ckptconv verify in nobias-mc | grep -E "^layer .*FAIL" | sed -E 's/ +- +- +- +FAIL/: FAIL/'
