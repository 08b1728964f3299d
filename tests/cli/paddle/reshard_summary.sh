# The one-line summary names both layouts and what was resharded.
ckptconv reshard "$TESTDATA/paddlenlp/fp32_pp4" out --tp 2
