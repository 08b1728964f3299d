# hf2paddle makes PaddleNLP's LlamaForCausalLM: a Qwen2 or Mistral model, or Llama 3's RoPE
# scaling, would be another model there; refused naming config.json, nothing written.
cp -r "$TESTDATA/hf/qwen2_tiny" "$TESTDATA/hf/mistral_tiny" "$TESTDATA/hf/llama3_tiny" .
for m in qwen2 mistral llama3; do
    ckptconv hf2paddle ${m}_tiny out
    echo "exit $?"
done
test ! -e out
