# A PaddleNLP directory: every file with its ranks, then the model the files make together.
ckptconv inspect "$TESTDATA/paddlenlp/bf16_tp2pp2" | sed "s|$TESTDATA|TESTDATA|" | grep -v "expected.json"
