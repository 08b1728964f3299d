# PaddleNLP's Qwen2: paddle2hf of PaddleNLP 3's own TP 2 save gives qwen2_tiny's tensors back
# (the tied head, saved twice, left out and said so); hf2paddle at TP 2 -> reshard to TP 1 ->
# paddle2hf gives back model.safetensors byte for byte. Refused, nothing written: pd2te (its
# map is LLaMA's), and a qwen2 config over LLaMA's tensors. (The fused layouts:
# qwen2_fused_*.)
set -e
ckptconv paddle2hf "$TESTDATA/paddlenlp/qwen2_tp2" p2h 2>&1 | sed -E 's/in [0-9.]+ s/in T s/'
cmp "$TESTDATA/hf/qwen2_tiny/model.safetensors" p2h/model.safetensors
ckptconv hf2paddle -q "$TESTDATA/hf/qwen2_tiny" pd --tp 2
ls pd
ckptconv reshard -q pd pd1 --tp 1
ckptconv paddle2hf -q pd1 back
cmp "$TESTDATA/hf/qwen2_tiny/model.safetensors" back/model.safetensors
set +e
ckptconv pd2te pd te
echo "pd2te: exit $?"
cp -r "$TESTDATA/paddlenlp/fp32_tp2" llama
python3 "$CLI_DIR/../hf/edit_json.py" llama/config.json model_type '"qwen2"'
ckptconv paddle2hf llama out
echo "qwen2 config over LLaMA tensors: exit $?"
test ! -e te && test ! -e out
