# transformers 5's fused experts (a layer's experts.gate_up_proj [E, 2 x ffn, h] and
# experts.down_proj [E, h, ffn], which 5.x saves only with save_original_format=False) are
# refused naming the tensor and the spelling ckptconv reads, nothing written. Derived here by
# renaming per-expert tensors (the name decides; 5.24's real files give the same message).
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
for m in qwen3_moe_tiny:mlp.experts.0.up_proj.weight:mlp.experts.gate_up_proj \
         mixtral_tiny:block_sparse_moe.experts.0.w2.weight:mlp.experts.down_proj; do
    IFS=: read -r dir from to <<< "$m"
    rm -rf in out && cp -r "$TESTDATA/hf/transformers5/$dir" in
    edit in/model.safetensors rename "model.layers.1.$from" "model.layers.1.$to"
    ckptconv hf2mcore in out -q
    echo "$dir with $to: exit $?"
    test ! -e out || echo "out written"
done
