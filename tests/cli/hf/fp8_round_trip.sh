# A checkpoint released in FP8 with 128x128 block scales (qwen3_tiny quantised as DeepSeek-V3
# and Qwen3 "-FP8" are; torch wrote the E4M3 bytes) goes to Megatron (TP2 PP2) and back as
# bf16 weights equal, byte for byte, to torch's dequantisation (float32 product, rounded to
# bf16): the scales are consumed, and the config.json written has no quantization_config.
# diff and verify read the FP8 directory dequantised too: the result is the same as its source,
# and verify runs it equal to the Megatron checkpoint (and not to the unquantised model).
set -e
src="$TESTDATA/hf/transformers5/qwen3_fp8_tiny"
ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
ckptconv mcore2hf mc hf -q
python3 "$CLI_DIR/tensor_sha.py" "$src/reference.json" hf/model.safetensors
if grep -q quantization_config hf/config.json; then echo "quantization_config kept"; else echo "no quantization_config"; fi
if ckptconv inspect hf | grep -q scale_inv; then echo "scales written"; else echo "no scales"; fi
ckptconv diff "$src" hf | tail -2
ckptconv verify "$src" mc -q && echo "verify mc: equal"
ckptconv verify "$src" "$TESTDATA/hf/transformers5/qwen3_tiny" -q || echo "verify unquantised: exit $?"
