# A Mixtral whose experts or router do not match its config.json is refused by hf2mcore, naming
# the tensor and what implies it, nothing written: an expert weight dropped, the router
# dropped, an expert past num_local_experts, one whose number has a leading zero, a router with
# a row too few. An expert pair swapped is a model of the same shape (a permutation the config
# cannot tell): it converts, and comes back swapped, byte for byte.
edit() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
src="$TESTDATA/hf/mixtral_tiny"
l1=model.layers.1.block_sparse_moe
for case in "remove $l1.experts.3.w2.weight" "remove $l1.gate.weight" \
            "copy $l1.experts.3.w1.weight $l1.experts.4.w1.weight" \
            "rename $l1.experts.2.w3.weight $l1.experts.02.w3.weight"; do
    rm -rf bad out && cp -r "$src" bad
    # shellcheck disable=SC2086
    edit bad/model.safetensors $case
    ckptconv hf2mcore bad out -q
    echo "$case: exit $?"
    test ! -e out || echo "out written"
done
rm -rf bad && cp -r "$src" bad
python3 "$CLI_DIR/../hf/edit_json.py" bad/config.json num_local_experts 3
ckptconv hf2mcore bad out -q
echo "num_local_experts 3: exit $?"
rm -rf bad out && cp -r "$src" bad
for w in w1 w2 w3; do
    edit bad/model.safetensors swap $l1.experts.0.$w.weight $l1.experts.1.$w.weight
done
ckptconv hf2mcore bad out --tp 2 -q && ckptconv mcore2hf out back -q && cmp bad/model.safetensors back/model.safetensors
echo "experts 0 and 1 swapped: exit $?"
