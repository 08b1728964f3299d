# PaddleNLP 2.8's pipeline (config.json: "paddlenlp_version": null) builds LlamaLMHead, not
# LlamaLMHeadPipe: one card to PP 2 names stage 1's head llama_lm_head_0.w_0 and its linears
# from linear_0.w_0, the files those of fp32_pp2.
ckptconv reshard "$TESTDATA/paddlenlp/fp32_tp1" out --pp 2 -q || exit 1
ckptconv inspect out/optimizer.pp01.pdopt | grep -E '^(linear_0|llama_lm_head_0)\.w_0_moment1_0 ' | cut -d' ' -f1
status=0
for f in $(cd "$TESTDATA/paddlenlp/fp32_pp2" && ls | grep -E '\.(pdparams|pdopt)$'); do
    diff <(ckptconv inspect --stats "out/$f" | tail -n +3) \
        <(ckptconv inspect --stats "$TESTDATA/paddlenlp/fp32_pp2/$f" | tail -n +3) || status=1
done
exit $status
