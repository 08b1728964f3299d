# What Megatron's args or a Mixtral config.json say that the other side cannot is refused,
# naming the file and the field, nothing written. config.json: router jitter (training noise
# hf2mcore writes no moe_input_jitter_eps for). Args (a TP 1 conversion's, edited): routing
# Mixtral does not compute (sigmoid scores, softmax before the top-k, shared experts), dense layers (moe_layer_freq 2, or a list with a 0; a list of 1s
# is every layer MoE and converts), and a num_experts the router's rows contradict.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
set_args() { python3 "$CLI_DIR/../dcp/set_args.py" "$@"; }
src="$TESTDATA/hf/mixtral_tiny"
rm -rf in && cp -r "$src" in
edit in/config.json router_jitter_noise 0.01
ckptconv hf2mcore in out
echo "router_jitter_noise 0.01: exit $?"
test ! -e out || echo "out written"
ckptconv hf2mcore "$src" mc -q || exit 1
for change in "moe_router_score_function='sigmoid'" "moe_router_pre_softmax=True" \
              "moe_shared_expert_intermediate_size=64" "moe_layer_freq=2" \
              "moe_layer_freq=[0,1]" "moe_layer_freq=[1,1]" "num_experts=3"; do
    rm -rf m hf && cp -r mc m
    set_args m/iter_0000001/mp_rank_00/model_optim_rng.pt "$change"
    ckptconv mcore2hf m hf -q
    echo "$change: exit $?"
done
