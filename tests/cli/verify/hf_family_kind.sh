# verify names a Hugging Face source by the family its config.json says (a lone weights
# file without one: no family), not LLaMA for all.
for m in llama3_tiny mistral_tiny qwen2_tiny transformers5/qwen2_tiny; do
    ckptconv verify "$TESTDATA/hf/$m" "$TESTDATA/hf/$m/model.safetensors" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["a"]["kind"], "|", r["b"]["kind"], "|", r["pass"])'
done
mkdir lone && cp "$TESTDATA/hf/qwen2_tiny/model.safetensors" lone/
ckptconv verify lone/model.safetensors "$TESTDATA/hf/qwen2_tiny" --json --num-heads 4 --num-kv-heads 2 \
    --norm-eps 1e-5 --rope-theta 1e6 --norm rmsnorm --activation swiglu --position rope | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["a"]["kind"], "|", r["b"]["kind"], "|", r["pass"])'
