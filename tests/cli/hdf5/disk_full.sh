# The disk fills up while an .h5 output is written (disk_full.c, preloaded: writes past a
# point of the output's temporary fail with ENOSPC): exit 1 with the error on one line, no
# temporary left. Past the first chunk, libhdf5 1.10.8 left the file half closed and the
# program crashed as it exited (H5_term_library).
set -e
[ -f "${CKPT_DISK_FULL:-}" ] || { echo "no preload library at CKPT_DISK_FULL=${CKPT_DISK_FULL:-} (build the tests)"; exit 1; }
python3 - <<'PY'
import json, struct
n = 261000
header = {"a/x": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]},
          "b/y": {"dtype": "F32", "shape": [4], "data_offsets": [4 * n, 4 * n + 16]}}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open("in.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + (bytes(range(256)) * (4 * n // 256 + 1))[:4 * n + 16])
PY
for at in 100000 1047500; do
    rc=0
    CKPT_DISK_FULL_AT=$at LD_PRELOAD=$CKPT_DISK_FULL ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
        ckptconv convert -q in.safetensors out.h5 2>&1 || rc=$?
    echo "exit $rc"
done
ls -A | grep -vx -e in.safetensors -e .bin || true
