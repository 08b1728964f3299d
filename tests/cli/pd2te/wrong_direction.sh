# A checkpoint already on the other side of the map is refused before anything is planned,
# and the message names the command that converts it (pd2te on TE names, te2pd on PaddleNLP).
ckptconv pd2te -q "$TESTDATA/llama/bf16_tp1" te || exit 9
ckptconv pd2te te again
echo "exit $?"
ckptconv te2pd "$TESTDATA/llama/bf16_tp1" back
echo "exit $?"
ls -A
