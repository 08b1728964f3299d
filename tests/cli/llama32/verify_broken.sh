# verify on a Llama 3.2 round trip with one tensor of layer 1 removed, or zeroed, fails
# naming the tensor or the layer; an unknown tensor beside the model's is refused by name.
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
src="$TESTDATA/hf/llama32_tiny"
set -e
ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
ckptconv mcore2hf mc hf -q
set +e
for case in "remove model.layers.1.mlp.up_proj.weight" "zero model.layers.1.self_attn.k_proj.weight" \
            "copy model.layers.1.mlp.up_proj.weight model.layers.1.mlp.extra.weight"; do
    rm -rf bad && cp -r hf bad
    # shellcheck disable=SC2086
    edit bad/model.safetensors $case
    ckptconv verify "$src" bad -q
    echo "$case: exit $?"
done
