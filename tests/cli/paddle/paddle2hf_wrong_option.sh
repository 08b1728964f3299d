ckptconv paddle2hf "$TESTDATA/paddlenlp/fp32_tp1" out --tp 2
