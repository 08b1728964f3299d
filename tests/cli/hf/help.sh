# --help of both directions.
ckptconv hf2mcore --help | head -n 3
ckptconv mcore2hf --help | head -n 3
# and each lists the families of formats/families, as the binary has them
for cmd in hf2mcore mcore2hf verify; do
    ckptconv "$cmd" --help | python3 -c '
import json, os, sys
root = os.path.join(sys.argv[1], "..", "..", "..", "formats", "families")
names = [n for n in json.load(open(os.path.join(root, "index.json")))
         if os.path.exists(os.path.join(root, n + ".json"))]
text = sys.stdin.read()
print(sys.argv[2], "--help lists every family" if ", ".join(names) in text else "--help lacks the family list")
' "$CLI_DIR" "$cmd"
done
