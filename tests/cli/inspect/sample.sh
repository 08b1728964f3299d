ckptconv inspect "$TESTDATA/sample/tiny_llama.pt"
