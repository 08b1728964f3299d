# A plain Distributed Checkpoint (world size 2): DTensor shards stitched, bytes items kept.
cp -r "$TESTDATA/dcp" dcp
ckptconv inspect dcp
ckptconv convert -q dcp out.safetensors
ckptconv inspect out.safetensors
