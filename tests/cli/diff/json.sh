# --json: one object with both sides, the tolerance, the verdict, the counts, the bytes
# compared, the time and every tensor; its keys are the ones README.md documents.
python3 "$CLI_DIR/st.py" a.safetensors w:F32:2x2:1,2,3,4 gone:F32:1:1 z:F32:2:0,1
python3 "$CLI_DIR/st.py" b.safetensors w:F32:2x2:1,2,3,4.5 z:F32:2:0,2
ckptconv diff a.safetensors b.safetensors --json --atol 0.1 > out.json
echo "exit $?"
ckptconv hf2mcore -q "$TESTDATA/hf/llama_tiny" mcore
ckptconv diff mcore "$TESTDATA/hf/llama_tiny" --map hf_llama_megatron --json > map.json
echo "map: exit $?"
python3 -c '
import json
r = json.load(open("out.json"))
print(r["command"], r["a"]["kind"], r["a"]["tensors"], r["b"]["tensors"], r["atol"], r["same"])
s = r.pop("summary")
seconds = s.pop("seconds")
print("seconds", isinstance(seconds, float) and seconds >= 0)
print(sorted(s.items()))
print(sorted(r))
print(sorted(r["a"]))
for t in r["tensors"]:
    print(t["name"], t["status"], t.get("max_abs"), t.get("max_rel"), t.get("first_index"), t.get("a"), t.get("b"))
    print(" ", sorted(t))
m = json.load(open("map.json"))
print(m["map"], m["mapped"], m["same"], m["summary"]["equal"], m["summary"]["state_only_a"], m["summary"]["only_a"])
print(sorted({t["status"] for t in m["tensors"]}))
print(sorted(next(t for t in m["tensors"] if t["status"] == "state_only_a")))
'
