set -e
echo old > out.safetensors
ckptconv convert -q --force "$TESTDATA/sample/tiny_llama.pt" out.safetensors
ckptconv inspect --json out.safetensors | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tensors"]))'
