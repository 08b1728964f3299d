# reshard of PaddleNLP 3's fused Qwen2 save (qwen2_tp2_fused): TP 2 -> TP 1 -> TP 2 gives back
# the files of the reshard at its own layout byte for byte, which hold PaddleNLP's tensors; TP 1
# holds whole fused tensors whose paddle2hf is qwen2_tiny's, and so does TP 2 PP 2. TP 4 would
# keep the 2 KV heads whole on every rank, which a fused qkv_proj cannot hold: refused.
set -e
cp -r "$TESTDATA/paddlenlp/qwen2_tp2_fused" src
F=src
ckptconv reshard -q "$F" same
ckptconv reshard -q "$F" tp1 --tp 1
ckptconv reshard -q tp1 back --tp 2
ls back
for f in $(ls same); do cmp "same/$f" "back/$f"; done
ckptconv diff "$F" same | tail -n 2
ckptconv inspect tp1/model_state.pdparams | grep -E '^qwen2.*(qkv_proj|gate_up_fused_proj)'
ckptconv paddle2hf -q tp1 tp1-hf
cmp "$TESTDATA/hf/qwen2_tiny/model.safetensors" tp1-hf/model.safetensors
ckptconv reshard -q "$F" pp2 --tp 2 --pp 2
ckptconv paddle2hf -q pp2 pp2-hf
cmp "$TESTDATA/hf/qwen2_tiny/model.safetensors" pp2-hf/model.safetensors
set +e
ckptconv reshard "$F" tp4 --tp 4
echo "TP 4: exit $?"
test ! -e tp4
