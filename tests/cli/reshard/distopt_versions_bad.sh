# megatron-core 0.19 keeps the common state (args, iteration, optimizer) in the checkpoint as
# the object common_state/shard_0_1, not in common.pt; a damaged or inconsistent one is
# refused naming the checkpoint and the object: its archive's CRC off, its args renamed.
# megatron-core 0.13.1's fully_sharded_model_space state that is not a fragment grid of its
# parameter (two items' names swapped in .metadata) is refused naming the item (by a reshard
# that keeps the optimizer; --no-optimizer needs none of it).
D="$TESTDATA/megatron/distopt/core019_a_tp2pp1dp2_buckets/dp_reshardable"
R=iter_0000003
patch_common() { # data file, python expression on the data.pkl bytes d (same length)
    python3 - "$1" "$2" "$3" <<'PY'
import struct, sys, zlib
path, expr, fix_crc = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
b = bytearray(open(path, "rb").read())
at = b.find(b"argparse\nNamespace")
lh = b.rfind(b"PK\x03\x04", 0, at)
n, e = struct.unpack_from("<HH", b, lh + 26)
start = lh + 30 + n + e
cd = b.find(b"PK\x01\x02", at)  # its central directory entry: the sizes (a data descriptor follows the data)
size = struct.unpack_from("<I", b, cd + 20)[0]
d = bytes(b[start:start + size])
new = eval(expr)
assert len(new) == len(d)
b[start:start + size] = new
if fix_crc:
    crc = zlib.crc32(new)
    struct.pack_into("<I", b, cd + 16, crc)
    if b[start + size:start + size + 4] == b"PK\x07\x08":
        struct.pack_into("<I", b, start + size + 4, crc)
open(path, "wb").write(bytes(b))
PY
}
cp -r "$D" crc
patch_common crc/$R/__0_0.distcp 'd.replace(b"Namespace", b"Namespacf")' 0
cp -r "$D" noargs
patch_common noargs/$R/__0_0.distcp 'd.replace(b"\x00argsq", b"\x00argzq", 1)' 1
cp -r "$TESTDATA/megatron/distopt/core013_a_tp2pp1dp2_buckets/fully_sharded_model_space" swapped
python3 - swapped/$R/.metadata <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
a, b = b"exp_avg.decoder.layers.mlp.linear_fc1.weight", b"exp_avg.decoder.layers.mlp.linear_fc2.weight"
open(sys.argv[1], "wb").write(d.replace(a, b"@@").replace(b, a).replace(b"@@", b))
PY
for set in crc noargs; do
    ckptconv inspect "$set" >/dev/null
    echo "$set: exit $?"
done
# the optimizer state is read where it is needed: a reshard that keeps it
ckptconv reshard swapped out -q
echo "swapped: exit $?"
