ckptconv convert "$TESTDATA/sample/tiny_llama.pt" tiny.safetensors
