# One card to PP 2 writes each stage's variable names as PaddleNLP 3's pipeline process of that
# stage builds them, from 0 (it used to keep the single card's linear_12.w_0 on stage 1, and
# PaddleNLP stopped on resume: "Optimizer set error, linear_0.w_0_moment1_0 should in state
# dict"): stage 1's first moments and every file (name table included) equal PaddleNLP 3's own PP 2
# run (fleet3_pp2).
ckptconv reshard "$TESTDATA/paddlenlp/fleet3_tp1" out --pp 2 -q || exit 1
ckptconv inspect out/optimizer.pp01.pdopt | grep -E '^(linear_0|create_parameter_0|llama_lm_head_pipe_0)\.w_0_moment1_0 '
status=0
for f in $(cd "$TESTDATA/paddlenlp/fleet3_pp2" && ls | grep -E '\.(pdparams|pdopt)$'); do
    diff <(ckptconv inspect --stats "out/$f" | tail -n +3) \
        <(ckptconv inspect --stats "$TESTDATA/paddlenlp/fleet3_pp2/$f" | tail -n +3) || status=1
done
exit $status
