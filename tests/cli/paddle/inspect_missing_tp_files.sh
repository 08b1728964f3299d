# inspect of a directory that lacks the TP ranks its config.json names says which file is missing.
mkdir in
cp "$TESTDATA/paddlenlp/fp32_tp2/"* in/
rm in/model_state.tp01.pdparams in/optimizer.tp01.pdopt
ckptconv inspect in
