# A Megatron GPT-2-style model with q/k layernorms (megatron/gpt2style_tp2: LayerNorm,
# linear biases, GELU, learned positions, tied) is no model transformers' GPT-2 computes:
# no family's args match, and the refusal is the first family's, as before GPT-2 was one.
ckptconv mcore2hf "$TESTDATA/megatron/gpt2style_tp2" out
echo "exit $?"
test ! -e out
