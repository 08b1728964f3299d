# convert writes an FP8 block-scaled model directory's weights as bf16, equal byte for byte to
# torch's dequantisation, the scales consumed: the qwen3 model, and a 130x136 weight of 2x2
# blocks, partial in both dimensions. inspect shows the stored F8 weights and says they are
# read dequantised; a weight without its scale is refused.
set -e
src="$TESTDATA/hf/transformers5/qwen3_fp8_tiny"
ckptconv inspect "$src" | grep -E '^fp8:|layers\.0\.self_attn\.q_proj\.weight'
ckptconv convert "$src" out.safetensors -q
python3 "$CLI_DIR/tensor_sha.py" "$src/reference.json" out.safetensors | awk '{print $2, $3}' | sort | uniq -c
if ckptconv inspect out.safetensors | grep -q scale_inv; then echo "scales written"; else echo "no scales"; fi
mkdir big
cp "$src/config.json" big/
cp "$src/big.safetensors" big/model.safetensors
chmod u+w big/model.safetensors
ckptconv convert big big.safetensors -q
python3 "$CLI_DIR/tensor_sha.py" "$src/reference.json" big.safetensors
python3 "$CLI_DIR/edit_tensor.py" big/model.safetensors remove big.weight_scale_inv
ckptconv convert big bad.safetensors -q || echo "exit $?"
test ! -e bad.safetensors
