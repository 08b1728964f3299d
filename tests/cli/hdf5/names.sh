# A tensor name HDF5 cannot hold as a path fails naming the tensor and why; nothing appears.
set -e
python3 - <<'PY'
import json, struct
header = {"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
          "x/y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open("clash.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(8))
PY
set +e
ckptconv convert clash.safetensors clash.h5
echo "exit $?"
ls
