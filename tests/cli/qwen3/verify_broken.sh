# verify of Qwen3 against a copy with layer 1's q and k norms swapped fails at layer 1; against
# a copy without layer 1's k norm, or with an unknown tensor beside the model's, it names the
# tensor. (The same breakages of a Megatron conversion: unit.test_family_qwen3.)
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
src="$TESTDATA/hf/transformers5/qwen3_tiny"
for case in "swap model.layers.1.self_attn.q_norm.weight model.layers.1.self_attn.k_norm.weight" \
            "remove model.layers.1.self_attn.k_norm.weight" \
            "copy model.layers.1.self_attn.k_norm.weight model.layers.1.self_attn.v_norm.weight"; do
    rm -rf bad && cp -r "$src" bad
    # shellcheck disable=SC2086
    edit bad/model.safetensors $case
    ckptconv verify "$src" bad -q
    echo "$case: exit $?"
done
