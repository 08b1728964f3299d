# The statistics of a dataset that is all fill value come without reading its elements: here
# 2^40 of them (the dims of a fixture's unallocated dataset made 2^20 x 2^20).
set -e
python3 - "$TESTDATA/hdf5/unallocated.h5" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
at = d.find(struct.pack("<QQ", 3, 4))  # contiguous_fill's dims, then its max dims
d[at:at + 16] = struct.pack("<QQ", 1 << 20, 1 << 20)
open("huge.h5", "wb").write(d)
PY
timeout 60 ckptconv inspect --stats huge.h5 | grep -E '^(name|contiguous_fill) '
