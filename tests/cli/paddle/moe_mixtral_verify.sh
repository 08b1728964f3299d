# verify runs PaddleNLP's Mixtral (family mixtral's verify.maps.paddle, verify_paddle_mixtral,
# written from PaddleNLP's MixtralSparseMoeBlock: router x @ gate, each expert
# w2(silu(x @ w1) * (x @ w3))) against the Hugging Face Mixtral it was converted from, at TP 2
# each rank's files as the rank runs them. One expert's w3 damaged on rank 1 fails that expert.
set -e
# each row's name and verdict, without the numbers
rows() { grep -E '^(layer|logits|A:|PASS|FAIL)' | sed -E 's/ +[-0-9.]+e[-+][0-9]+//g; s/ +[01]\.[0-9]{10}//; s/ +/ /g'; }
ckptconv hf2paddle -q "$TESTDATA/hf/mixtral_tiny" tp2 --tp 2
ckptconv verify tp2 "$TESTDATA/hf/mixtral_tiny" | rows
mkdir bad
cp tp2/* bad/
ckptconv convert -q bad/model_state.tp01.pdparams tp01.safetensors
python3 "$CLI_DIR/../hf/edit_tensor.py" tp01.safetensors add mixtral.layers.1.block_sparse_moe.experts.2.w3.weight 0.5
rm bad/model_state.tp01.pdparams
ckptconv convert -q tp01.safetensors bad/model_state.tp01.pdparams
set +e
ckptconv verify bad "$TESTDATA/hf/mixtral_tiny" | rows
echo "damaged expert: exit ${PIPESTATUS[0]}"
