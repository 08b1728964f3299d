# verify of a GPT-2 against its Megatron conversion notes no config difference: the RoPE
# fields are nothing a model with learned positions computes (Hugging Face's reader leaves
# rope_theta unset, Megatron's args carry the default 10000).
src="$TESTDATA/hf/gpt2_tiny"
ckptconv hf2mcore "$src" mc --tp 2 --pp 2 -q
ckptconv verify "$src" mc > out.txt
echo "verify: exit $?"
grep "configs differ" out.txt
echo "notes about the configs: $(grep -c "configs differ" out.txt)"
