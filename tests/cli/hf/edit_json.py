"""edit_json.py FILE KEY VALUE: set KEY (a/b for key b of object a) of the JSON object in FILE to
VALUE, read as JSON (unquoted text that is no JSON is taken as a string); VALUE "--delete"
removes the key. Used to derive broken inputs from the fixtures."""
import json
import sys

path, key, value = sys.argv[1:4]
with open(path) as f:
    root = json.load(f)
*parents, last = key.split("/")
node = root
for p in parents:
    node = node[p]
if value == "--delete":
    del node[last]
else:
    try:
        node[last] = json.loads(value)
    except ValueError:
        node[last] = value
with open(path, "w") as f:
    json.dump(root, f, indent=2)
