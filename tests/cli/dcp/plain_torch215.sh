# The plain Distributed Checkpoint (world size 2) as torch 2.15 writes it: DTensor shards
# stitched, bytes items kept.
cp -r "$TESTDATA/dcp215" dcp
ckptconv inspect dcp
ckptconv convert -q dcp out.safetensors
ckptconv inspect out.safetensors
