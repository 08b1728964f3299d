# A megatron-core torch_dist checkpoint at TP2 (bf16, torch 2.10): every tensor at its global
# shape (layers stacked on the first axis, chunks of both ranks stitched), common.pt's entries
# at the top.
cp -r "$TESTDATA/megatron/dist_tp2_bf16/iter_0000010" it
ckptconv inspect it
