ckptconv convert "$TESTDATA/sample/tiny_llama.pt" out.pt --dtype int8
