# An optimizer file of another model (same variable names, other shapes) is refused, with the way out.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp1/model_state.pdparams" "$TESTDATA/paddlenlp/fp32_tp1/config.json" in/
cp "$TESTDATA/llama/fp32_tp1/optimizer.pdopt" in/
ckptconv reshard in out --tp 2 || exit $?
