# flip.py SRC DST OFFSET XOR: a copy of SRC with one byte flipped (d[OFFSET] ^= XOR).
import sys

src, dst, off, x = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
d = bytearray(open(src, "rb").read())
d[off] ^= x
open(dst, "wb").write(d)
