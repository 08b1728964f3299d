# PaddleNLP 3's own PP3 run to PP 2: stage 1 gets layers 3-4, the norm and the head, named as
# that stage's process names them (linear_0.w_0 on, llama_lm_head_pipe_0.w_0), the files those
# of PaddleNLP 3's own PP 2 run (fleet3_pp2), config.json included.
ckptconv reshard "$TESTDATA/paddlenlp/fleet3_pp3" out --tp 1 --pp 2 -q || exit 1
status=0
for f in $(cd "$TESTDATA/paddlenlp/fleet3_pp2" && ls | grep -E '\.(pdparams|pdopt)$'); do
    echo "$f"
    diff <(ckptconv inspect --stats "out/$f" | tail -n +3) \
        <(ckptconv inspect --stats "$TESTDATA/paddlenlp/fleet3_pp2/$f" | tail -n +3) || status=1
done
cmp out/config.json "$TESTDATA/paddlenlp/fleet3_pp2/config.json" || status=1
exit $status
