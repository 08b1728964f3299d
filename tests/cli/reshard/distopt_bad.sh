# A distributed optimizer's state that does not fit its checkpoint is refused, naming the
# file, the grad buffer and the numbers, before anything is written: the TP 1 run's
# distrib_optim.pt in a TP 2 rank (numel_unpadded differs from the layout of its parameters),
# numel_unpadded alone off by 64 (the tensors as they were), a file cut short, a
# flat tensor cut short, megatron-core's pre-2024 per-bucket format (no buckets_coalesced),
# one rank's file missing, every rank's missing while args say the distributed optimizer ran.
D="$TESTDATA/megatron/distopt/a_tp2pp1dp2_buckets/legacy"
R=iter_0000003
rewrite() { # zip member suffix, python expression on its bytes d
    python3 - "$1" "$2" "$3" <<'PY'
import re, sys, zipfile
path, suffix, expr = sys.argv[1:]
z = zipfile.ZipFile(path)
items = [(i, z.read(i.filename)) for i in z.infolist()]
z.close()
with zipfile.ZipFile(path, "w") as out:
    for i, d in items:
        out.writestr(i, eval(expr) if i.filename.endswith(suffix) else d)
PY
}
cp -r "$D" swapped
cp "$TESTDATA/megatron/distopt/a_tp1pp1dp1/legacy/$R/mp_rank_00/distrib_optim.pt" swapped/$R/mp_rank_01/
cp -r "$D" numel
rewrite numel/$R/mp_rank_01/distrib_optim.pt data.pkl \
    're.sub(rb"(numel_unpadded.{0,3}M)(..)", lambda m: m.group(1) + (int.from_bytes(m.group(2), "little") + 64).to_bytes(2, "little"), d, flags=re.S)'
cp -r "$D" short
rewrite short/$R/mp_rank_01/distrib_optim.pt /data/1 'd[:len(d) // 2]'
cp -r "$D" cut
head -c $(($(wc -c <"$D/$R/mp_rank_00/distrib_optim.pt") / 2)) "$D/$R/mp_rank_00/distrib_optim.pt" \
    >cut/$R/mp_rank_00/distrib_optim.pt
cp -r "$D" legacy2023
rewrite legacy2023/$R/mp_rank_00/distrib_optim.pt data.pkl 'd.replace(b"buckets_coalesced", b"buckets_coalescex")'
cp -r "$D" one_missing
rm one_missing/$R/mp_rank_01/distrib_optim.pt
cp -r "$D" none
rm none/$R/mp_rank_0*/distrib_optim.pt
for set in swapped numel short cut legacy2023 one_missing none; do
    ckptconv reshard "$set" out --tp 1 --pp 1
    echo "$set: exit $?"
done
test ! -e out && echo "no output"
ckptconv reshard swapped out --tp 1 --pp 1 --no-optimizer -q && echo "model only: exit 0"
