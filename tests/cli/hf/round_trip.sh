# HF -> Megatron (TP2 PP2) -> HF gives back the input files byte for byte.
set -e
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" mc --tp 2 --pp 2 --transformer-impl local
ls mc/iter_0000001
ckptconv mcore2hf mc hf --max-shard-size 100KB
for f in "$TESTDATA"/hf/llama_tiny/*.safetensors "$TESTDATA/hf/llama_tiny/model.safetensors.index.json"; do
    cmp "$f" "hf/$(basename "$f")"
done
ls hf
