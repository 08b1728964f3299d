# A megatron-core torch_dist checkpoint at TP2: every tensor at its global shape (layers
# stacked on the first axis, chunks of both ranks stitched), common.pt's entries at the top.
cp -r "$TESTDATA/megatron/dist_tp2/iter_0000010" it
ckptconv inspect it
