# A non-distributed optimizer's checkpoint lists each parameter's key in the optimizer's state
# dict and its param group (Megatron's weight-decay split), rank by rank.
ckptconv inspect "$TESTDATA/megatron/tp2pp2_bf16_optim"
