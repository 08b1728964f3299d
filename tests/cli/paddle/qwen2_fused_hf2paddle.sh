# hf2paddle --fused-qkv --fused-ffn at TP 2 writes, rank by rank, the tensors PaddleNLP 3 wrote
# itself with fuse_attention_qkv and fuse_attention_ffn (qwen2_tp2_fused), bytes equal; the tied
# head, which PaddleNLP saves again as lm_head.weight, is the one tensor it leaves out. Its
# config.json says the fused layout.
ckptconv hf2paddle -q "$TESTDATA/hf/qwen2_tiny" pd --tp 2 --fused-qkv --fused-ffn || exit 1
for r in 00 01; do
    ckptconv diff "pd/model_state.tp$r.pdparams" "$TESTDATA/paddlenlp/qwen2_tp2_fused/model_state.tp$r.pdparams" |
        tail -n +3
done
grep fuse_attention pd/config.json
