# PaddleNLP 3's own PP3 run to TP 2, optimizer included: every file lists the tensors (names,
# shapes, values) of PaddleNLP 3's own TP 2 run (fleet3_tp2).
ckptconv reshard "$TESTDATA/paddlenlp/fleet3_pp3" out --tp 2 --pp 1 -q || exit 1
status=0
for f in $(cd "$TESTDATA/paddlenlp/fleet3_tp2" && ls | grep -E '\.(pdparams|pdopt)$'); do
    echo "$f"
    diff <(ckptconv inspect --stats "out/$f" | tail -n +3) \
        <(ckptconv inspect --stats "$TESTDATA/paddlenlp/fleet3_tp2/$f" | tail -n +3) || status=1
done
exit $status
