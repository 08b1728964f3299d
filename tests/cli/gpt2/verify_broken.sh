# verify of a GPT-2 conversion whose layer 1 lost its fused q/k/v bias (zeroed), or one of
# its weights, fails naming layer 1 (or the tensor), whichever side is broken.
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
src="$TESTDATA/hf/gpt2_tiny"
ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
ckptconv mcore2hf mc hf -q
cp -r hf zero && edit zero/model.safetensors zero transformer.h.1.attn.c_attn.bias
ckptconv verify "$src" zero | grep -E "^layer|FAIL"
echo "zeroed bias: exit ${PIPESTATUS[0]}"
cp -r hf removed && edit removed/model.safetensors remove transformer.h.1.mlp.c_fc.weight
ckptconv verify "$src" removed
echo "removed tensor: exit $?"
ckptconv hf2mcore removed mc2 -q
echo "hf2mcore of it: exit $?"
