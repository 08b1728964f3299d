# hf2paddle makes PaddleNLP's LlamaForCausalLM or Qwen2ForCausalLM: a Mistral model, or Llama
# 3's RoPE scaling, would be another model there; refused naming config.json, nothing written.
# (Qwen2 converts: tests/cli/paddle/qwen2_*.sh.)
cp -r "$TESTDATA/hf/mistral_tiny" "$TESTDATA/hf/llama3_tiny" .
for m in mistral llama3; do
    ckptconv hf2paddle ${m}_tiny out
    echo "exit $?"
done
test ! -e out
