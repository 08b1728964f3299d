ckptconv convert "$TESTDATA/sample/tiny_llama.pt" out.weights
