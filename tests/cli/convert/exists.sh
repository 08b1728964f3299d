echo keep > out.safetensors
ckptconv convert "$TESTDATA/sample/tiny_llama.pt" out.safetensors
status=$?
cat out.safetensors
ls -A
exit $status
