# A directory without one TP rank's model file is refused, naming the rank.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
rm in/model_state.tp01.pdparams
ckptconv reshard in out --tp 1
