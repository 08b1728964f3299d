# A .zst input cut short fails naming the file and the reason; no output appears.
zstd -q "$TESTDATA/sample/tiny_llama.pt" -o model.pt.zst
head -c 5000 model.pt.zst > cut.pt.zst
ckptconv convert cut.pt.zst out.safetensors
status=$?
ls
exit $status
