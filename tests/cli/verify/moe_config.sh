# The MoE facts come from Megatron's args. moe_router_pre_softmax flipped in a copy: the
# router and every expert still agree on their own, the layers do not (the experts' weights
# are softmax over all experts instead of over the top 2), and the note names the config
# field. Routing verify does not compute is refused, exit 1: the expert bias of aux-loss-free
# routing under softmax scores (verify runs it with DeepSeek-V3's sigmoid scores).
src="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy"
copy() {
    rm -rf "$1"
    cp -r "$src" "$1"
    chmod -R u+w "$1"
    for f in "$1"/iter_*/mp_rank_*/model_optim_rng.pt; do python3 "$CLI_DIR/set_bool_arg.py" "$f" "$2" true; done
}
copy pre moe_router_pre_softmax
ckptconv verify "$src" pre --device cpu --tokens 16 --json | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["pass"], [l["name"] for l in o["layers"] if not l["pass"]])
print([n for n in o["notes"] if "moe" in n])'
copy bias moe_router_enable_expert_bias
ckptconv verify "$src" bias --device cpu --tokens 16
echo "exit $?"
