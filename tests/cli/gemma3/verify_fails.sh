# verify holds a Gemma 3 conversion against its HF source and names the first broken layer:
# layer 1's norms given Gemma's +1 a second time (a converter that stores 1 + w where the
# zero-centred norms want w), layer 1's q_norm and k_norm swapped, layer 1's post-MLP norm
# removed from the HF model (named) and left out of a Megatron conversion.
src="$TESTDATA/hf/transformers5/gemma3_tiny"
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" in/model.safetensors "$@"; }
rm -rf in && cp -r "$src" in
for t in input_layernorm post_attention_layernorm pre_feedforward_layernorm post_feedforward_layernorm \
         self_attn.q_norm self_attn.k_norm; do
    edit add "model.layers.1.$t.weight" 1
done
ckptconv hf2mcore in plus_one --tp 2 -q
ckptconv verify "$src" plus_one --device cpu -q
echo "plus one twice: exit $?"
rm -rf in && cp -r "$src" in
edit swap model.layers.1.self_attn.q_norm.weight model.layers.1.self_attn.k_norm.weight
ckptconv hf2mcore in swapped --tp 2 -q
ckptconv verify "$src" swapped --device cpu -q
echo "q/k norms swapped: exit $?"
rm -rf in && cp -r "$src" in
edit remove model.layers.1.post_feedforward_layernorm.weight
ckptconv verify "$src" in --device cpu -q
echo "removed: exit $?"
ckptconv hf2mcore "$src" full --tp 2 -q
ckptconv reshard full cut --drop decoder.layers.1.mlp.linear_fc2.post_layernorm.weight -q
ckptconv verify "$src" cut --device cpu -q
echo "left out of Megatron: exit $?"
