# verify holds a conversion of a linearly scaled Gemma 3 (testdata/hf/transformers5/
# gemma3_linear_tiny) to its source's RoPE and names the full-attention layer (1) where it
# differs: the factor left out of the Megatron side's args (hf_rope_scaling_factor renamed in
# every rank file), and in the converted config.json (in both its spellings, transformers 5's
# rope_parameters and 4.5x's rope_scaling) the factor applied twice (64) or dropped (rope_type
# default); the sliding layer (0) and the rest agree. A config.json whose two spellings say
# different factors or RoPE bases (the two transformers would build different models) is
# refused.
src="$TESTDATA/hf/transformers5/gemma3_linear_tiny"
edit() { python3 "$CLI_DIR/../hf/edit_json.py" hf/config.json "$@"; }
set -e
ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
ckptconv mcore2hf mc hf -q
for f in mc/iter_0000001/*/model_optim_rng.pt; do
    python3 "$CLI_DIR/../rules/rename_key.py" "$f" hf_rope_scaling_factor hf_rope_scaling_gone
done
set +e
ckptconv verify "$src" mc --device cpu -q
echo "Megatron args without the factor: exit $?"
edit rope_parameters/full_attention '{"factor": 64.0, "rope_theta": 1000000.0, "rope_type": "linear"}'
ckptconv verify "$src" hf --device cpu -q
echo "only rope_parameters' factor changed: exit $?"
edit rope_scaling '{"factor": 64.0, "rope_type": "linear"}'
ckptconv verify "$src" hf --device cpu -q
echo "factor applied twice: exit $?"
edit rope_parameters/full_attention '{"rope_theta": 1000000.0, "rope_type": "default"}'
edit rope_scaling null
ckptconv verify "$src" hf --device cpu -q
echo "factor dropped: exit $?"
ckptconv verify "$src" hf --device cpu --layers 0 -q
echo "the sliding layer alone: exit $?"
edit rope_theta 200000.0
ckptconv verify "$src" hf --device cpu -q
echo "only rope_theta changed: exit $?"
