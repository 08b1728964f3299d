# --dry-run of hf2mcore: the rank files and how each tensor is made; nothing written.
set -e
ckptconv hf2mcore "$TESTDATA/hf/llama_tiny" out --tp 2 --dry-run > plan.txt
test ! -e out
head -n 1 plan.txt
grep -c "model_optim_rng.pt (torch" plan.txt
grep "model/decoder.layers.0.self_attention.linear_qkv.weight " plan.txt | head -n 1
