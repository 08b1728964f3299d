# Without config.json there is nothing to make the Hugging Face config from.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp1/model_state.pdparams" in/
ckptconv paddle2hf in out
