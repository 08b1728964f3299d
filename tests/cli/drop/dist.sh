# torch_dist (megatron-core's Distributed Checkpoint): a tensor no layout rule takes is refused
# with the way out, --drop leaves it out (reshard, mcore2hf) and the report lists it. The
# renamed tensor is made by renaming a key of the fixture's .metadata (same length, so the
# pickle stays whole).
cp -r "$TESTDATA/megatron/dist_tp1" d
python3 -c '
import sys
p = "d/iter_0000010/.metadata"
b = open(p, "rb").read()
open(p, "wb").write(b.replace(b"decoder.final_layernorm.weight", b"decoder.final_layernorm.weigh7"))'
ckptconv reshard d r --tp 2 2>&1; echo "exit $?"
ckptconv mcore2hf d h 2>&1; echo "exit $?"
test ! -e r && test ! -e h
ckptconv reshard d r --tp 2 --drop '*.weigh7' --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], r["to"]["tp"], r["dropped"], [f["tensors"] for f in r["files"] if f["kind"] == "tensors"])'
ckptconv inspect r | grep -c final_layernorm || true
ckptconv mcore2hf d h --drop '*.weigh7' 2>&1; echo "exit $?"
ckptconv reshard "$TESTDATA/megatron/dist_tp1" r2 --drop decoder.final_layernorm.weight 2>&1 | sed 's/in [0-9.]* s$/in T s/'; echo "exit ${PIPESTATUS[0]}"
ckptconv inspect r2 | grep -c final_layernorm || true
