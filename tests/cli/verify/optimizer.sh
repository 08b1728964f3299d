# verify --optimizer compares fp32 masters and both Adam moments by parameter name, across
# layouts: a reshard moves the state without changing a bit. One element of one moment
# changed in a copy of the input fails it, exit 1, naming that state.
ckptconv reshard "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" tp1 --tp 1 -q
ckptconv verify "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" tp1 --optimizer --device cpu --tokens 4 -q
echo "exit $?"
ckptconv verify "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" tp1 --optimizer --device cpu --tokens 4 --json | python3 -c '
import json, sys
o = json.load(sys.stdin)["optimizer"]
print(o["pass"], len(o["states"]), sorted(set(s["status"] for s in o["states"])))'
cp -r "$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/legacy" mutated
chmod -R u+w mutated
f=mutated/iter_0000003/mp_rank_01/model_optim_rng.pt
ckptconv convert "$f" rank1.safetensors -q
python3 - "$f" rank1.safetensors <<'PY'
import json, struct, sys
path, st = sys.argv[1], sys.argv[2]
with open(st, 'rb') as s:
    n = struct.unpack('<Q', s.read(8))[0]
    head = json.loads(s.read(n))
    lo, hi = head['optimizer/state/3/exp_avg_sq']['data_offsets']
    s.seek(8 + n + lo)
    want = s.read(hi - lo)
data = bytearray(open(path, 'rb').read())
at = data.find(want)
assert at >= 0 and data.find(want, at + 1) < 0
data[at + 4 * 70:at + 4 * 71] = struct.pack('<f', 1.0)
open(path, 'wb').write(data)
PY
ckptconv verify mutated tp1 --optimizer --device cpu --tokens 4 -q
echo "exit $?"
ckptconv verify mutated tp1 --optimizer --device cpu --tokens 4 --optimizer-rtol 1e30 -q
echo "exit $?"
