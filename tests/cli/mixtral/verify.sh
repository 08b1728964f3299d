# verify runs Mixtral and Qwen3-MoE layers from their Hugging Face files and from the Megatron
# checkpoint hf2mcore writes of them at TP 2 PP 2 EP 2 (each expert under its global index):
# the two pass, router and every expert compared on their own. A pair of experts swapped in the
# Hugging Face file (layer 0's experts 1 and 2, which the config cannot tell apart) fails,
# naming both experts and nothing else of the layer.
mutate() { python3 "$CLI_DIR/../verify/mutate_tensor.py" "$@"; }
for m in mixtral_tiny transformers5/qwen3_moe_tiny; do
    rm -rf in mc && cp -r "$TESTDATA/hf/$m" in
    ckptconv hf2mcore in mc --tp 2 --pp 2 --ep 2 -q || exit 1
    ckptconv verify in mc -q
    echo "verify $m and its Megatron checkpoint: exit $?"
done
rm -rf in mc && cp -r "$TESTDATA/hf/mixtral_tiny" in && cp in/model.safetensors ref.safetensors
ckptconv hf2mcore in mc --tp 2 --pp 2 --ep 2 -q || exit 1
mutate in/model.safetensors ref.safetensors swap model.layers.0.block_sparse_moe.experts.1.w1.weight \
    model.layers.0.block_sparse_moe.experts.2.w1.weight
ckptconv verify in mc -q
echo "experts 1 and 2 swapped: exit $?"
ckptconv verify in mc | awk '/^layer 0 / { s = $1; for (i = 2; i <= NF - 4; i++) s = s " " $i; print s ": " $NF }'
