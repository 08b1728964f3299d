# megatron-core 0.13.1's dp_zero_gather_scatter with a damaged state item (rank 1's
# optimizer.distributed.dp_group_idx_1.param_state/shard_0_1, bytes [0, 18209) of
# __1_1.distcp, the torch.save archive of [distrib_optim.pt dict]): cut short (the zip's
# directories zeroed), numel_unpadded changed (CRC fixed), a key renamed (CRC left as it is),
# the item renamed in .metadata. Each reshard that keeps the optimizer fails naming the file
# and the item; --no-optimizer writes the model.
Z="$TESTDATA/megatron/distopt/core013_a_tp2pp1dp2_buckets/dp_zero_gather_scatter"
R=iter_0000003
for s in cut numel key gone; do
    cp -r "$Z" $s
    chmod -R u+w $s
done
python3 - cut/$R/__1_1.distcp numel/$R/__1_1.distcp key/$R/__1_1.distcp gone/$R/.metadata <<'PY'
import struct, sys, zlib
L = 18209
b = bytearray(open(sys.argv[1], "rb").read())
assert b[:4] == b"PK\x03\x04" and b.rfind(b"PK\x05\x06", 0, L) > L - 200
b[L - 512:L] = bytes(512)
open(sys.argv[1], "wb").write(bytes(b))
b = bytearray(open(sys.argv[2], "rb").read())
at = b.find(b"numel_unpadded")
lh = b.rfind(b"PK\x03\x04", 0, at)
n, e = struct.unpack_from("<HH", b, lh + 26)
start = lh + 30 + n + e
cd = b.find(b"PK\x01\x02", at)
size = struct.unpack_from("<I", b, cd + 20)[0]
d = bytes(b[start:start + size])
i = d.find(b"numel_unpadded")
k = d.find(struct.pack("<H", 1344), i)
assert 0 < k - i < 24
d = d[:k] + struct.pack("<H", 1343) + d[k + 2:]
b[start:start + size] = d
crc = zlib.crc32(d)
struct.pack_into("<I", b, cd + 16, crc)
if b[start + size:start + size + 4] == b"PK\x07\x08":
    struct.pack_into("<I", b, start + size + 4, crc)
open(sys.argv[2], "wb").write(bytes(b))
b = bytearray(open(sys.argv[3], "rb").read())
b[b.find(b"numel_unpadded")] = ord("o")
open(sys.argv[3], "wb").write(bytes(b))
d = open(sys.argv[4], "rb").read()
open(sys.argv[4], "wb").write(d.replace(b"dp_group_idx_1.param_state", b"dp_group_idx_1.param_statx"))
PY
for s in cut numel key gone; do
    ckptconv reshard $s out_$s -q
    echo "$s: exit $?"
    ckptconv reshard $s model_$s --no-optimizer -q
    echo "$s --no-optimizer: exit $?"
done
