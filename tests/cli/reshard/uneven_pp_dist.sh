# torch_dist at an uneven pipeline split: its items hold the global layer axis whatever the
# stages, so only the file each layer's chunk goes to (its stage's ranks) and args change. The 4
# layers of testdata/megatron/tp1 written at PP 2 with a first stage of 1 layer are read back as
# the same model as from the even torch_dist (no rng state in either): at PP 1, and at the split
# args give; that legacy set written as torch_dist again gives the same files. megatron-core
# 0.16.1 loads these: testdata/gen/check_mcore_uneven_pp.py. A custom layout string is refused.
set -e
S="$TESTDATA/megatron/tp1"
R=iter_0000010
same() {
    for f in $(cd "$1" && find . -name '*.pt' | sort); do cmp -s "$1/$f" "$2/$f" || { echo "$2: $f differs"; return 1; }; done
    echo "$2: the bytes of $1"
}
ckptconv reshard -q "$S" td --pp 2 --decoder-first-pipeline-num-layers 1 --to torch_dist --no-optimizer
ls td/$R
ckptconv inspect td | grep -c 'decoder.layers' | sed 's/^/items with layers: /'
ckptconv reshard -q "$S" td_even --pp 2 --to torch_dist --no-optimizer
ckptconv reshard -q td_even direct --pp 1
ckptconv reshard -q td even --pp 1
same direct even
ckptconv reshard -q td_even first1 --pp 2 --decoder-first-pipeline-num-layers 1
ckptconv reshard -q td kept
same first1 kept
ckptconv reshard -q kept td2 --to torch_dist
for f in .metadata __0_0.distcp __1_0.distcp; do cmp td/$R/$f td2/$R/$f; done && echo "legacy uneven -> torch_dist: the same files"
# the even split at PP 2 writes layer 1's chunk into stage 0's file
cmp -s td/$R/__0_0.distcp td_even/$R/__0_0.distcp || echo "even PP 2: other data files"
# a custom layout string in args is refused, naming it: the split it gives is not read
set +e
cp -r td layout
python3 "$CLI_DIR/poke_pickle.py" layout/$R/common.pt '(pipeline_model_parallel_layout(?:q.|r....))N' 'X\x03\x00\x00\x00t|t'
ckptconv reshard layout x --pp 1
echo "layout string: exit $?"
test ! -e x && echo "nothing written"
set -e
# the distributed optimizer's state (testdata/megatron/distopt/c_tp1pp2dp1_vpp2: 8 layers) at a
# first stage of 1 layer of 8, legacy (distrib_optim.pt per stage) and torch_dist
# (dp_reshardable: each stage's grad buffers hold its own layers), back at PP 1: the bytes of
# the direct reshard
O="$TESTDATA/megatron/distopt/c_tp1pp2dp1_vpp2/legacy"
ckptconv reshard -q "$O" o_direct --pp 1
ckptconv reshard -q "$O" o_uneven --pp 2 --decoder-first-pipeline-num-layers 1
ckptconv reshard -q o_uneven o_back --pp 1
same o_direct o_back
ckptconv reshard -q "$O" o_td_direct --pp 1 --to torch_dist
ckptconv reshard -q o_td_direct o_td_direct_legacy --pp 1
ckptconv reshard -q "$O" o_td --pp 2 --decoder-first-pipeline-num-layers 1 --to torch_dist
ckptconv reshard -q o_td o_td_back --pp 1
same o_td_direct_legacy o_td_back
