set -e
ckptconv convert --json "$TESTDATA/sample/tiny_llama.pt" out.safetensors | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["input_format"], d["output_format"], d["tensors"], d["bytes_written"] > 0, len(d["notes"]))'
