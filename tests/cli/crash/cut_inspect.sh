# inspect --stats of a .pdparams cut short once opened: an error naming it, not SIGBUS.
. "$CLI_DIR/cut.bash"
INPUTS=pd
cp -r "$TESTDATA/llama/fp32_tp1" pd
cut_run pd/model_state.pdparams opened inspect --stats pd/model_state.pdparams
cp "$TESTDATA/llama/fp32_tp1/model_state.pdparams" pd/
cut_run pd/model_state.pdparams map inspect pd/model_state.pdparams
