# PaddleNLP 3's own PP2 run (one process per stage, each naming its parameters from 0: both
# stages hold linear_0.w_0) merged to one card with its optimizer state: the files are those
# PaddleNLP 3 writes on one card (fleet3_tp1), tensor for tensor (names, shapes, values), and
# the optimizer's keys are that process's (it used to stop on "two tensors are named
# 'linear_0.w_0_moment1_0'"). Its config.json has no tensor_parallel_degree (PaddleNLP 3 leaves
# the default out), which is TP 1.
grep -q tensor_parallel_degree "$TESTDATA/paddlenlp/fleet3_pp2/config.json" && echo "the fixture names its TP degree"
ckptconv reshard "$TESTDATA/paddlenlp/fleet3_pp2" out --tp 1 --pp 1 -q || exit 1
status=0
for f in model_state.pdparams optimizer.pdopt; do
    diff <(ckptconv inspect --stats "out/$f" | tail -n +3) \
        <(ckptconv inspect --stats "$TESTDATA/paddlenlp/fleet3_tp1/$f" | tail -n +3) || status=1
done
ls out | grep -E '\.(pdparams|pdopt)$'
exit $status
