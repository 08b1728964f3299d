# convert --fp8 keep writes an FP8 block-scaled model directory as it is stored: every tensor
# of the one output file equals the input's, F8_E4M3 weights and float32 scales byte for
# byte, in safetensors and in torch (float8_e4m3fn storages, as torch >= 2.1 saves them). The
# scales are checked as when dequantising: a weight without its scale is refused and nothing
# is written. --fp8 keep with --dtype, which would cast the weights apart from their scales,
# is a usage error.
set -e
src="$TESTDATA/hf/transformers5/qwen3_fp8_tiny"
for out in keep.safetensors keep.pt; do
    ckptconv convert "$src" "$out" --fp8 keep -q
    echo "$out: $(ckptconv diff "$src/model.safetensors" "$out" | tail -1)"
    echo "$out: $(ckptconv inspect "$out" | grep -c '^[^ ].* float8_e4m3fn ') F8 weights, $(ckptconv inspect "$out" | grep -c '_scale_inv') scales"
done
ckptconv convert "$src" deq.safetensors --fp8 dequantize -q
echo "dequantize: $(ckptconv inspect deq.safetensors | grep -c '^[^ ].* float8_e4m3fn ') F8 weights"
mkdir big
cp "$src/config.json" big/
cp "$src/big.safetensors" big/model.safetensors
chmod u+w big/model.safetensors
python3 "$CLI_DIR/edit_tensor.py" big/model.safetensors remove big.weight_scale_inv
set +e
ckptconv convert big bad.safetensors --fp8 keep -q
echo "exit $?"
test ! -e bad.safetensors
ckptconv convert "$src" cast.safetensors --fp8 keep --dtype bfloat16
echo "exit $?"
ckptconv convert "$src" x.safetensors --fp8 raw
echo "exit $?"
