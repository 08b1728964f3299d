# Transformer Engine's grouped GEMM experts (TEGroupedMLP: Megatron's --moe-grouped-gemm with
# --transformer-impl transformer_engine): per MoE layer and EP rank linear_fc1.weight<i> ..,
# one linear_fc1._extra_state, then linear_fc2's, local expert i's weight as SequentialMLP's
# expert i holds it (a set written by torch from these facts, apart from ckptconv:
# tests/interop/test_te_grouped.sh). Read as SequentialMLP's experts: back to SequentialMLP
# byte for byte, through other EP / TP / PP / expert TP and back byte for byte, to Hugging
# Face as the source (verify runs it), to torch_dist as the SequentialMLP set's items. A set missing a
# weight<i> is refused naming the file and the tensor.
set -e
src="$TESTDATA/hf/mixtral_tiny"
R=iter_0000001
keys() { ckptconv inspect "$1" | awk '/^model\//{print $1}'; }
same_set() { # the files of set $1 are those of set $2, byte for byte (else the test stops)
    for f in "$1"/$R/mp_rank_*/*.pt; do cmp "$f" "$2/${f#"$1"/}" || exit 1; done
}
ckptconv hf2mcore "$src" seq --ep 2 -q
ckptconv reshard seq te --tp 1 --pp 1 --moe-grouped-gemm on -q
keys te/$R/mp_rank_00_001/model_optim_rng.pt | grep 'layers\.1\.mlp\.experts'
python3 "$CLI_DIR/show_args.py" te/$R/mp_rank_00_001/model_optim_rng.pt moe_grouped_gemm transformer_impl
ckptconv hf2mcore "$src" hf_te --ep 2 --moe-grouped-gemm -q
same_set te hf_te && echo "hf2mcore --moe-grouped-gemm: the same bytes"
ckptconv reshard -q te te.seq --tp 1 --pp 1 --moe-grouped-gemm off
same_set seq te.seq && echo "TEGroupedMLP -> SequentialMLP: its bytes"
ckptconv reshard -q te same --tp 1 --pp 1
same_set te same && echo "TEGroupedMLP -> itself: the same bytes"
for t in "ep1 --ep 1" "ep4 --ep 4" "tp2pp2 --tp 2 --pp 2" "etp1 --tp 2 --etp 1" "tp2ep1 --tp 2 --ep 1"; do
    # shellcheck disable=SC2086
    set -- $t
    n=$1
    shift
    ckptconv reshard -q te "$n" --tp 1 --pp 1 "$@"
    ckptconv reshard -q "$n" "$n.back" --tp 1 --pp 1 --ep 2
    same_set te "$n.back"
    ckptconv mcore2hf "$n" "$n.hf" -q
    cmp "$src/model.safetensors" "$n.hf/model.safetensors"
    echo "$n: $(ls "$n/$R" | tr '\n' ' ')-> EP 2: the same bytes; Hugging Face: the source"
done
keys ep1/$R/mp_rank_00/model_optim_rng.pt | grep 'layers\.0\.mlp\.experts\.linear_fc2'
keys etp1/$R/mp_rank_01_001/model_optim_rng.pt | grep 'layers\.0\.mlp\.experts\.linear_fc1'
ckptconv mcore2hf te te.hf -q
cmp "$src/model.safetensors" te.hf/model.safetensors && echo "TEGroupedMLP -> Hugging Face: the source"
ckptconv verify "$src" te -q && echo "verify: Hugging Face's forward"
# the local spec's GroupedMLP where args say local
ckptconv hf2mcore "$src" local --ep 2 --moe-grouped-gemm --transformer-impl local -q
keys local/$R/mp_rank_00_001/model_optim_rng.pt | grep 'layers\.0\.mlp\.experts'
# torch_dist keys TEGroupedMLP's weight<i> as SequentialMLP's experts: the same items
ckptconv reshard -q te td_te --tp 1 --pp 1 --to torch_dist --extra-state drop
ckptconv reshard -q seq td_seq --tp 1 --pp 1 --to torch_dist --extra-state drop
for f in .metadata __0_0.distcp; do cmp td_seq/$R/$f td_te/$R/$f; done && echo "torch_dist: SequentialMLP's items"
# (a torch_dist source's experts are SequentialMLP's unless --moe-grouped-gemm on)
ckptconv reshard -q td_te td_back --tp 1 --pp 1 --ep 2 --moe-grouped-gemm on
same_set te td_back && echo "torch_dist -> TEGroupedMLP: the same bytes"
set +e
# weight1 of layer 0's linear_fc1 renamed weight7: expert 1 has none
cp -r te missing
python3 "$CLI_DIR/../reshard/poke_pickle.py" missing/$R/mp_rank_00_001/model_optim_rng.pt \
    '(layers[.]0[.]mlp[.]experts[.]linear_fc1[.]weight)1' '7'
ckptconv reshard missing out --tp 1 --pp 1 --ep 1
echo "missing: exit $?"
test ! -e out && echo "nothing written"
