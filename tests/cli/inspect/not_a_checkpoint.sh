ckptconv inspect "$TESTDATA/bad/not_a_checkpoint.txt"
