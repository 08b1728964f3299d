# A checkpoint holding tensors its model does not run is refused, naming them: Megatron q/k
# layernorms whose args say qk_layernorm false (the args imply the tensors), a Hugging Face
# tensor the verify map takes no rule for (a whole directory, and one of its files).
cp -r "$TESTDATA/megatron/gpt2style_tp2" g
for f in g/iter_0000010/mp_rank_0*/model_optim_rng.pt; do
    python3 "$CLI_DIR/set_bool_arg.py" "$f" qk_layernorm false
done
ckptconv verify g 2>&1; echo "exit $?"
ckptconv verify g "$TESTDATA/megatron/gpt2style_tp2" --json 2>&1; echo "exit $?"
cp -r "$TESTDATA/hf/llama_tiny" h
python3 "$CLI_DIR/../drop/add_tensor.py" h model.layers.0.self_attn.foo.weight
ckptconv verify h "$TESTDATA/hf/llama_tiny" 2>&1; echo "exit $?"
ckptconv verify h/model-00007-of-00007.safetensors h/model-00007-of-00007.safetensors 2>&1; echo "exit $?"
