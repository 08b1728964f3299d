# torch_dist files of other megatron-core versions (README_megatron_distopt_versions.md):
# 0.19 keeps its common state in the checkpoint (no common.pt), 0.13.1's .metadata pickles
# its MCoreSavePlan. Each is read, resharded to legacy and to torch_dist, and the results
# compared.
V="$TESTDATA/megatron/distopt"
ckptconv inspect "$V/core019_a_tp2pp1dp2_buckets/dp_reshardable" | sed -n '2,3p'
ckptconv reshard "$V/core019_a_tp2pp1dp2_buckets/dp_reshardable" legacy19 --tp 1 --pp 2 --dp 2 -q
echo "0.19 dp_reshardable -> legacy: exit $?"
ckptconv reshard "$V/core019_a_tp2pp1dp2_buckets/dp_reshardable" dist19 --to torch_dist --tp 1 -q
echo "0.19 dp_reshardable -> torch_dist: exit $?"
ckptconv verify legacy19 dist19 -q
echo "verify: exit $?"
# 0.13.1's default form, fully_sharded_model_space (the optimizer state N-D flattened)
ckptconv reshard "$V/core013_a_tp2pp1dp2_buckets/fully_sharded_model_space" legacy13 --tp 1 --pp 2 --dp 2 -q
echo "0.13.1 fully_sharded_model_space -> legacy: exit $?"
ckptconv reshard "$V/core013_a_tp2pp1dp2_buckets/fully_sharded_model_space" dist13 --to torch_dist -q
echo "0.13.1 fully_sharded_model_space -> torch_dist: exit $?"
ckptconv verify legacy13 dist13 -q
echo "verify: exit $?"
