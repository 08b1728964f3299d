# A mixture of experts with the non-distributed optimizer (megatron-core 0.16.1: at EP > 1
# model_optim_rng.pt['optimizer'] is ChainedOptimizer's [dense, expert] list of torch state
# dicts, each numbering its own parameters; at EP 1 one state dict, the experts in the dense
# decay group). Made from the distributed-optimizer fixture with --to-optimizer plain (the
# files megatron-core's run without --use-distributed-optimizer saves, tensor for tensor:
# tests/interop/distopt_check.py, oracle_moe_plain.json), then moved to EP 1, EP 4, expert TP 1
# under TP 2 and TP 2 PP 2 EP 4 and back: the bytes of the same-layout reshard each time. The
# same state as the distributed optimizer's at every layout; the expert state of a file that
# does not fit its parameters is refused, naming the file and the parameter.
set -e
D="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy"
R=iter_0000003
ckptconv reshard -q "$D" plain --tp 1 --pp 1 --to-optimizer plain
ckptconv inspect plain/$R/mp_rank_00_001/model_optim_rng.pt | awk '/^optimizer\/1\/state\/0\//{print $1, $2}'
ckptconv reshard -q plain same --tp 1 --pp 1
for t in "ep1 --ep 1" "ep4 --ep 4 --dp 4" "etp1 --tp 2 --ep 2 --etp 1" "tp2pp2ep4 --tp 2 --pp 2 --ep 4 --dp 4"; do
    # shellcheck disable=SC2086
    set -- $t
    n=$1
    shift
    ckptconv reshard -q plain "$n" --tp 1 --pp 1 "$@"
    ckptconv reshard -q "$n" "$n.back" --tp 1 --pp 1 --ep 2 --dp 2
    for f in same/$R/mp_rank_*/*.pt; do cmp "$f" "$n.back/${f#same/}"; done
    # the distributed optimizer's state at that layout
    ckptconv reshard -q "$D" "$n.dist" --tp 1 --pp 1 "$@"
    ckptconv reshard -q "$n" "$n.to_dist" --tp 1 --pp 1 "$@" --to-optimizer distributed
    for f in "$n.dist"/$R/mp_rank_*/*.pt; do ckptconv diff -q "$f" "$n.to_dist/${f#"$n.dist"/}"; done
    echo "$n: $(ls "$n/$R" | tr '\n' ' ')-> EP 2: the same bytes; as the distributed optimizer: its state"
done
ckptconv inspect ep1/$R/mp_rank_00/model_optim_rng.pt | grep -c '^optimizer/state/.*/exp_avg '
set +e
cp -r plain unknown_id
# the expert optimizer's last param id (its last group's, the last in the file) 7 -> 8: no state
python3 "$CLI_DIR/poke_pickle.py" unknown_id/$R/mp_rank_00_001/model_optim_rng.pt '(.*K\x06)K\x07e' 'K\x08e'
ckptconv reshard unknown_id out --tp 1 --pp 1 --ep 1
echo "unknown_id: exit $?"
test ! -e out && echo "nothing written"
