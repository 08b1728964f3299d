# Qwen2, Mistral and Llama 3 models that transformers wrote come back from Megatron as
# themselves: the same model.safetensors, a config.json of the family (Qwen2ForCausalLM with
# its q/k/v biases, Mistral's sliding window, llama3 RoPE scaling as transformers 4 and 5 read
# it), and verify finds the two models equal.
set -e
show() { python3 "$CLI_DIR/show_config.py" "$@"; }
for m in qwen2 mistral llama3 transformers5/llama3; do
    src="$TESTDATA/hf/${m}_tiny"
    ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
    ckptconv mcore2hf mc hf -q
    cmp "$src/model.safetensors" hf/model.safetensors
    echo "== $m"
    show hf/config.json
    ckptconv verify "$src" hf -q
    rm -rf mc hf
done
