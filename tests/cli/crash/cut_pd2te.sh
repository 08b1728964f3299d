# pd2te of a directory whose .pdparams is cut short while mapped or once opened.
. "$CLI_DIR/cut.bash"
INPUTS=pd
cp -r "$TESTDATA/llama/fp32_tp1" pd
cut_run pd/model_state.pdparams map pd2te pd out
cp "$TESTDATA/llama/fp32_tp1/model_state.pdparams" pd/
cut_run pd/model_state.pdparams opened pd2te pd out
