# A fused q/k/v bias of the wrong size (layer 1's qkv_proj.bias replaced, in both rank files, by
# a copy of its o_proj weight): refused naming the directory, the tensor, its merged shape, the
# shape config.json implies and the fields it comes from; nothing written.
mkdir in
cp "$TESTDATA/paddlenlp/qwen2_tp2_fused/"* in/
for r in 00 01; do
    ckptconv convert -q "in/model_state.tp$r.pdparams" "tp$r.safetensors" || exit 1
    python3 "$CLI_DIR/../hf/edit_tensor.py" "tp$r.safetensors" remove qwen2.layers.1.self_attn.qkv_proj.bias
    python3 "$CLI_DIR/../hf/edit_tensor.py" "tp$r.safetensors" copy qwen2.layers.1.self_attn.o_proj.weight \
        qwen2.layers.1.self_attn.qkv_proj.bias
    rm "in/model_state.tp$r.pdparams"
    ckptconv convert -q "tp$r.safetensors" "in/model_state.tp$r.pdparams" || exit 1
done
ckptconv paddle2hf in out
status=$?
test ! -e out || echo "out was written"
exit $status
