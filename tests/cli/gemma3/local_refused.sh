# megatron-core's local layer spec has no post-attention or post-MLP norm, so Gemma 3 is written
# with Transformer Engine names only; asking for local names is refused with the reason, and
# nothing is written.
ckptconv hf2mcore "$TESTDATA/hf/transformers5/gemma3_tiny" out --transformer-impl local
echo "exit $?"
test ! -e out || echo "out written"
