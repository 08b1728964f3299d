# PaddleNLP 3's own Qwen2 save at TP 2 with fuse_attention_qkv and fuse_attention_ffn
# (testdata/paddlenlp/qwen2_tp2_fused: qkv_proj, weight and bias, per KV group [q | k | v];
# gate_up_fused_proj [gate_r | up_r] per rank) gives the Hugging Face directory its unfused save
# of the same weights gives (qwen2_tp2), byte for byte: qwen2_tiny's tensors.
set -e
ckptconv paddle2hf "$TESTDATA/paddlenlp/qwen2_tp2_fused" fused 2>&1 | sed -E 's/in [0-9.]+ s/in T s/'
ckptconv paddle2hf -q "$TESTDATA/paddlenlp/qwen2_tp2" unfused
cmp fused/model.safetensors unfused/model.safetensors
cmp fused/config.json unfused/config.json
cmp fused/model.safetensors "$TESTDATA/hf/qwen2_tiny/model.safetensors"
