# A Megatron model transformers' LLaMA cannot hold is refused, saying why; nothing written.
ckptconv mcore2hf "$TESTDATA/megatron/gpt2style_tp2" out
echo "exit $?"
test ! -e out
