# Weights with no config.json near them: the missing values are named, and flags give them.
mkdir m && cp "$TESTDATA/hf/llama_tiny/"*.safetensors "$TESTDATA/hf/llama_tiny/model.safetensors.index.json" m/
ckptconv verify m/model.safetensors.index.json "$TESTDATA/hf/llama_tiny" --device cpu
echo "exit $?"
ckptconv verify m/model.safetensors.index.json "$TESTDATA/hf/llama_tiny" --device cpu -q --layers 1 \
    --num-heads 4 --num-kv-heads 2 --norm-eps 1e-5 --norm rmsnorm --activation swiglu --position rope
echo "exit $?"
