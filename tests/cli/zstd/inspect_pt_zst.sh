# A torch.save file compressed by the zstd CLI opens as the torch file it holds; the note
# says what decompressing it took.
set -e
zstd -q "$TESTDATA/sample/tiny_llama.pt" -o model.pt.zst
ckptconv inspect model.pt.zst
