ckptconv convert "$TESTDATA/sample/tiny_llama.pt" no/such/dir/out.pt
