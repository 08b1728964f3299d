# verify --optimizer across optimizer kinds: a distributed optimizer's state (distrib_optim.pt
# of a real megatron-core run, bf16, tied embeddings over two stages) against its
# non-distributed form at TP 1 PP 1 passes; one element of one moment changed in a copy of
# distrib_optim.pt fails it, exit 1, naming the parameter and the state.
D="$TESTDATA/megatron/distopt/b_tp2pp2dp1_bf16_tied/legacy"
ckptconv reshard -q "$D" plain --tp 1 --pp 1 --to-optimizer plain
ckptconv verify "$D" plain --optimizer --device cpu --tokens 4 -q
echo "exit $?"
cp -r "$D" mutated
chmod -R u+w mutated
f=mutated/iter_0000003/mp_rank_01_001/distrib_optim.pt
ckptconv convert "$f" flat.safetensors -q
python3 - "$f" flat.safetensors <<'PY'
import json, struct, sys
path, st = sys.argv[1], sys.argv[2]
with open(st, 'rb') as s:
    n = struct.unpack('<Q', s.read(8))[0]
    head = json.loads(s.read(n))
    lo, hi = head['0/(torch.bfloat16, torch.float32)/exp_avg']['data_offsets']
    s.seek(8 + n + lo)
    want = s.read(hi - lo)
data = bytearray(open(path, 'rb').read())
at = data.find(want)
assert at >= 0 and data.find(want, at + 1) < 0
data[at:at + 4] = struct.pack('<f', 0.5)
open(path, 'wb').write(data)
PY
ckptconv verify mutated plain --optimizer --device cpu --tokens 4 -q
echo "exit $?"
# the same run's state in megatron-core's three saved forms, legacy and torch_dist, agrees
for form in dp_reshardable fully_reshardable; do
    ckptconv verify "$TESTDATA/megatron/distopt/b_tp2pp2dp1_bf16_tied/$form" "$D" --optimizer --device cpu --tokens 4 -q
    echo "$form: exit $?"
done
