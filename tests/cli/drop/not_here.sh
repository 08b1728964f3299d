# --drop where no tensor is ever left out (pd2te, te2pd, zero-to-fp32) is a usage error, not an
# option silently ignored; one that matches no tensor is an error.
ckptconv reshard "$TESTDATA/paddlenlp/fp32_tp2" out --tp 1 --drop "x*" 2>&1 | sed "s|$TESTDATA|TESTDATA|"; echo "exit ${PIPESTATUS[0]}"
ckptconv pd2te "$TESTDATA/paddlenlp/fp32_tp2" out --drop "x*" 2>&1 | sed "s|$TESTDATA|TESTDATA|"; echo "exit ${PIPESTATUS[0]}"
ckptconv zero-to-fp32 in out --drop "x*" 2>&1 | sed "s|$TESTDATA|TESTDATA|"; echo "exit ${PIPESTATUS[0]}"
ckptconv paddle2hf "$TESTDATA/paddlenlp/fp32_tp2" out --drop "x*" 2>&1 | sed "s|$TESTDATA|TESTDATA|"; echo "exit ${PIPESTATUS[0]}"
ls -A
