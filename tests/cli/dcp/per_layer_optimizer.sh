# Optimizer state of a model whose torch_dist keys its layers one by one (moe_layer_freq a list:
# megatron-core 0.16.1's non_homogeneous_layers) is neither written nor read as torch_dist yet:
# both are refused naming the checkpoint and --no-optimizer, which converts the model. The
# model is the EP 2 Mixtral-style fixture with its args saying moe_layer_freq [1, 1] (every layer
# MoE, yet keyed per layer): its legacy files to torch_dist and back give the same tensors.
set -e
setargs() { python3 "$CLI_DIR/set_args.py" "$@"; }
cp -r "$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2" m
for f in m/legacy/iter_0000003/mp_rank_00_00[01]/model_optim_rng.pt m/dp_reshardable/iter_0000003/common.pt; do
    setargs "$f" "moe_layer_freq=[1, 1]"
done
ckptconv reshard m/legacy td --to torch_dist --no-optimizer -q
ckptconv inspect td/iter_0000003 | grep -E "^decoder.layers.1.mlp.experts"
ckptconv reshard td back --to torch -q
ckptconv diff m/legacy back | tail -1
ckptconv reshard m/dp_reshardable out --to torch --no-optimizer -q
echo "dp_reshardable --no-optimizer: exit $?"
set +e
ckptconv reshard m/legacy td2 --to torch_dist -q
echo "legacy with optimizer -> torch_dist: exit $?"
test ! -e td2 || echo "td2 written"
ckptconv reshard m/dp_reshardable out2 --to torch -q
echo "dp_reshardable with optimizer -> torch: exit $?"
test ! -e out2 || echo "out2 written"
