mkdir -p in && cp "$TESTDATA/llama/bf16_tp1/model_state.pdparams" in/
ckptconv pd2te in in/sub; echo "exit $?"
ls -A in
