# Without config.json and flags, te2pd cannot split layernorm_qkv of a GQA model: it asks for
# the head counts instead of splitting in thirds, and writes nothing.
ckptconv pd2te -q "$TESTDATA/llama/bf16_tp1" te || exit 9
rm te/config.json
ckptconv te2pd te pd
status=$?
ls -A
exit $status
