# --json: one object with both sides, the tolerance, the verdict, the counts and every tensor.
python3 "$CLI_DIR/st.py" a.safetensors w:F32:2x2:1,2,3,4 gone:F32:1:1 z:F32:2:0,1
python3 "$CLI_DIR/st.py" b.safetensors w:F32:2x2:1,2,3,4.5 z:F32:2:0,2
ckptconv diff a.safetensors b.safetensors --json --atol 0.1 > out.json
echo "exit $?"
python3 -c '
import json
r = json.load(open("out.json"))
print(r["command"], r["a"]["kind"], r["a"]["tensors"], r["b"]["tensors"], r["atol"], r["same"])
print(sorted(r["summary"].items()))
for t in r["tensors"]:
    print(t["name"], t["status"], t.get("max_abs"), t.get("max_rel"), t.get("first_index"), t.get("a"), t.get("b"))
'
