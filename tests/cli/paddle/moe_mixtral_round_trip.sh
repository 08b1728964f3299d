# PaddleNLP's Mixtral: hf2paddle of the tiny Hugging Face Mixtral (bf16) writes the tensors
# PaddleNLP 3 itself makes of it (from_pretrained(convert_from_torch=True), save_pretrained:
# names, [in, out] transposes of q/k/v/o, the router and every expert's w1/w2/w3, bf16 as
# uint16), checked against testdata/gen/paddlenlp_moe_oracle.json's hashes; at TP 2 (experts
# cut column/row like a dense MLP, the router whole) each rank holds what PaddleNLP's own split
# actions cut, and resharded back to TP 1 it is the same.
# paddle2hf of both gives model.safetensors back byte for byte.
set -e
oracle() {
    ckptconv convert -q "$1" "$1.safetensors"
    python3 "$CLI_DIR/moe_oracle.py" "$TESTDATA/gen/paddlenlp_moe_oracle.json" mixtral "$1.safetensors" $2
    rm "$1.safetensors"
}
ckptconv hf2paddle "$TESTDATA/hf/mixtral_tiny" pd 2>&1 | sed -E 's/in [0-9.]+ s/in T s/'
ls pd
oracle pd/model_state.pdparams
ckptconv hf2paddle -q "$TESTDATA/hf/mixtral_tiny" tp2 --tp 2
ls tp2
oracle tp2/model_state.tp00.pdparams 0
oracle tp2/model_state.tp01.pdparams 1
# the router whole on every rank, each expert cut like a dense MLP
ckptconv inspect tp2 | grep -E 'block_sparse_moe\.(gate|experts\.3)' | grep 'layers\.1\.' | awk '{print $1, $5}'
ckptconv reshard -q tp2 tp1 --tp 1
oracle tp1/model_state.pdparams
ckptconv paddle2hf pd back 2>&1 | sed -E 's/in [0-9.]+ s/in T s/'
cmp "$TESTDATA/hf/mixtral_tiny/model.safetensors" back/model.safetensors
ckptconv paddle2hf -q tp2 back2
cmp "$TESTDATA/hf/mixtral_tiny/model.safetensors" back2/model.safetensors
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c["architectures"], c["num_local_experts"], c["num_experts_per_tok"], c["dtype"])' pd/config.json
