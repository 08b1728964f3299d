# A torch_dist checkpoint whose distributed optimizer form is not read (common.pt's
# optimizer['param_state_sharding_type'] renamed, 'dp_reshardable' -> 'dp_reshardablx', CRC
# fixed): --no-optimizer and --to-optimizer none write the model, in either format, as if the
# checkpoint had no optimizer state; keeping the optimizer (legacy or torch_dist target,
# verify --optimizer) fails with the reason, and inspect shows it.
D="$TESTDATA/megatron/distopt/a_tp2pp1dp2_buckets"
cp -r "$D/dp_reshardable" unk
chmod -R u+w unk
python3 - unk/iter_0000003/common.pt <<'PY'
import struct, sys, zlib
path = sys.argv[1]
b = bytearray(open(path, "rb").read())
at = b.find(b"dp_reshardable")
lh = b.rfind(b"PK\x03\x04", 0, at)
n, e = struct.unpack_from("<HH", b, lh + 26)
start = lh + 30 + n + e
cd = b.find(b"PK\x01\x02", at)
size = struct.unpack_from("<I", b, cd + 20)[0]
d = bytes(b[start:start + size]).replace(b"dp_reshardable", b"dp_reshardablx")
b[start:start + size] = d
crc = zlib.crc32(d)
struct.pack_into("<I", b, cd + 16, crc)
if b[start + size:start + size + 4] == b"PK\x07\x08":
    struct.pack_into("<I", b, start + size + 4, crc)
open(path, "wb").write(bytes(b))
PY
ckptconv reshard unk legacy --no-optimizer --tp 1 -q
echo "--no-optimizer: exit $?"
ckptconv verify legacy "$D/legacy" -q
echo "verify against the legacy twin: exit $?"
ckptconv reshard unk dist --to torch_dist --to-optimizer none -q
echo "--to torch_dist --to-optimizer none: exit $?"
ckptconv verify dist "$D/legacy" -q
echo "verify against the legacy twin: exit $?"
ckptconv inspect dist | grep -c '^optimizer' 
ckptconv reshard unk keep -q
echo "keep: exit $?"
ckptconv reshard unk keep_dist --to torch_dist -q
echo "keep, torch_dist: exit $?"
ckptconv reshard unk plain --to-optimizer plain -q
echo "--to-optimizer plain: exit $?"
ckptconv verify --optimizer unk "$D/legacy" -q
echo "verify --optimizer: exit $?"
ckptconv inspect unk | grep '^optimizer state'
echo "inspect: exit ${PIPESTATUS[0]}"
