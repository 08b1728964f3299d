# A mixture of experts at expert TP 1 under TP 2 as a source: megatron-core's files of expert
# data-parallel rank 0 only (TP 2 EP 2: mp_rank_00_000 and mp_rank_01_001; TP 2 EP 4 also
# 00_002 and 01_003, whose dense tensors are copies of 00_000's and 01_001's and whose
# distrib_optim.pt is [None, expert]), written by the reshard of the 4-expert EP 2 fixture
# (megatron-core 0.16.1 writes the same files: tests/interop/distopt_check.py, oracle_moe.json
# pairs 5 and 6). Resharded back, with the distributed optimizer and without, they give the
# bytes of the source's same-layout reshard (the source's content); read as sources for
# another expert TP layout, torch_dist, inspect, diff, mcore2hf and verify they are the same
# model. A copy that is not its twin, a missing or extra file, a state list that does not
# fit, and targets the legacy save cannot hold are refused, naming what.
set -e
D="$TESTDATA/megatron/distopt/m_tp1pp1dp2_ep2/legacy"
R=iter_0000003
same() { # $1 holds the bytes of $2 (a same-layout reshard of the source), the source's content
    for f in "$2"/$R/mp_rank_*/*.pt; do
        rel=${f#"$2"/}
        cmp -s "$f" "$1/$rel" || { echo "$1: $rel differs"; return 1; }
        ckptconv diff -q "$D/$rel" "$1/$rel" || { echo "$1: $rel differs from the source"; return 1; }
    done
    echo "$1: $(ls "$2"/$R | wc -l) ranks of $2's bytes"
}
ckptconv reshard -q "$D" same --tp 1 --pp 1
ckptconv reshard -q "$D" same_model --tp 1 --pp 1 --no-optimizer
ckptconv reshard -q "$D" etp1 --tp 2 --pp 1 --ep 2 --etp 1
ls etp1/$R
ckptconv reshard -q etp1 back --tp 1 --pp 1 --ep 2
same back same
ckptconv reshard -q "$D" etp1_model --tp 2 --pp 1 --ep 2 --etp 1 --no-optimizer
ckptconv reshard -q etp1_model back_model --tp 1 --pp 1 --ep 2 --no-optimizer
same back_model same_model
ckptconv reshard -q "$D" ep4 --tp 2 --pp 1 --ep 4 --etp 1 --dp 2
ls ep4/$R
ckptconv reshard -q ep4 back4 --tp 1 --pp 1 --ep 2 --dp 2
same back4 same
# from one expert TP layout to another: the bytes of the direct reshard
ckptconv reshard -q etp1 ep4_again --tp 2 --pp 1 --ep 4 --etp 1 --dp 2
for f in ep4/$R/mp_rank_*/*.pt; do cmp "$f" "ep4_again/${f#ep4/}"; done && echo "TP 2 EP 2 -> TP 2 EP 4 at expert TP 1: same bytes"
ckptconv reshard -q "$D" pp2 --tp 2 --pp 2 --ep 4 --etp 1 --dp 2
ls pp2/$R | tr '\n' ' '
echo
ckptconv reshard -q pp2 back_pp2 --tp 1 --pp 1 --ep 2 --dp 2
same back_pp2 same
ckptconv reshard -q "$D" td --tp 1 --pp 1 --to torch_dist
ckptconv reshard -q etp1 td_etp1 --tp 1 --pp 1 --to torch_dist
for f in td/$R/*; do cmp "$f" "td_etp1/${f#td/}"; done && echo "torch_dist: the source's files"
ckptconv inspect etp1 | sed -n '3p;8,11p'
ckptconv diff -q "$D" ep4 && echo "diff: the same model"
ckptconv mcore2hf -q "$D" hf
ckptconv mcore2hf -q ep4 hf_ep4
cmp hf/model.safetensors hf_ep4/model.safetensors && echo "mcore2hf: the same bytes"
ckptconv verify "$D" etp1 | grep -E '^(PASS|FAIL)'
set +e
poke() { # byte $2 of storage $3 in rank file $1 flipped
    python3 - "$@" <<'PY'
import sys, zipfile
path, at, storage = sys.argv[1], int(sys.argv[2]), sys.argv[3]
z = zipfile.ZipFile(path)
items = [(i, z.read(i.filename)) for i in z.infolist()]
z.close()
with zipfile.ZipFile(path, "w") as out:
    for i, d in items:
        if i.filename.endswith("/data/" + storage):
            d = d[:at] + bytes([d[at] ^ 1]) + d[at + 1:]
        out.writestr(i, d)
PY
}
cp -r ep4 twin
poke twin/$R/mp_rank_00_002/model_optim_rng.pt 5 0
cp -r ep4 missing
rm -r missing/$R/mp_rank_01_003
cp -r etp1 extra
cp -r etp1/$R/mp_rank_00_000 extra/$R/mp_rank_01_000
cp -r ep4 dense_state
cp ep4/$R/mp_rank_00_000/distrib_optim.pt dense_state/$R/mp_rank_00_002/
for set in twin missing extra; do
    ckptconv reshard "$set" out --tp 1 --pp 1 --ep 2 --no-optimizer
    echo "$set: exit $?"
done
ckptconv inspect missing >/dev/null
echo "inspect missing: exit $?"
ckptconv reshard dense_state out --tp 1 --pp 1 --ep 2
echo "dense_state: exit $?"
for opts in "--tp 1 --etp 2" "--tp 2 --etp 4 --ep 2" "--tp 4 --etp 1 --ep 2" "--tp 2 --etp 1 --ep 1"; do
    # shellcheck disable=SC2086
    ckptconv reshard etp1 out --pp 1 $opts
    echo "$opts: exit $?"
done
test ! -e out && echo "nothing written"
