# A megatron-core torch_dist checkpoint at TP2 written under torch 2.15, whose .metadata also
# holds both ranks' save plans (read past as data): the same tensors as under torch 2.10.
cp -r "$TESTDATA/megatron/dist215_tp2/iter_0000010" it
ckptconv inspect it
