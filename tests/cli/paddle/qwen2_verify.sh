# verify runs PaddleNLP's Qwen2 (family qwen2's verify.maps.paddle, verify_paddle_qwen2): its
# TP 2 saves, unfused and fused (qkv_proj weight and bias split per KV group on each rank,
# [gate_r | up_r] as the rank's fc1), each rank's files as the rank runs them, against
# qwen2_tiny, which they hold; the tied head (saved again as lm_head.weight) is the embedding.
# A fused bias damaged on rank 1 fails layer 1.
set -e
rows() { awk '/^layer/ {print $1, $2, $NF} /^logits/ {print $1, $NF} /^(A:|PASS|FAIL)/'; }
for d in qwen2_tp2 qwen2_tp2_fused; do
    ckptconv verify "$TESTDATA/paddlenlp/$d" "$TESTDATA/hf/qwen2_tiny" | rows
done
mkdir bad
cp "$TESTDATA/paddlenlp/qwen2_tp2_fused/"* bad/
ckptconv convert -q bad/model_state.tp01.pdparams tp01.safetensors
python3 "$CLI_DIR/../hf/edit_tensor.py" tp01.safetensors add qwen2.layers.1.self_attn.qkv_proj.bias 0.5
rm bad/model_state.tp01.pdparams
ckptconv convert -q tp01.safetensors bad/model_state.tp01.pdparams
set +e
ckptconv verify bad "$TESTDATA/hf/qwen2_tiny" | rows
echo "damaged bias: exit ${PIPESTATUS[0]}"
