# A GPT-2 saved as the hub's openai-community/gpt2 is (GPT2Model's names, no "transformer."
# prefix: h.0.attn.c_attn.bias, wte.weight, ...) is the same model as the one with the prefix:
# hf2mcore writes the same Megatron bytes from it, and verify takes it on either side.
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
src="$TESTDATA/hf/gpt2_tiny"
cp -r "$src" hub && chmod -R u+w hub
names=$(python3 - hub/model.safetensors <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
print(" ".join(k for k in header if k != "__metadata__"))
PY
)
for n in $names; do edit hub/model.safetensors rename "$n" "${n#transformer.}"; done
ckptconv hf2mcore hub mc --tp 2 --pp 2 -q
echo "hf2mcore: exit $?"
ckptconv hf2mcore "$src" ref --tp 2 --pp 2 -q
diff -r mc ref && echo "same Megatron bytes"
ckptconv verify hub "$src" -q
echo "verify hub prefixed: exit $?"
ckptconv verify hub mc -q
echo "verify hub megatron: exit $?"
