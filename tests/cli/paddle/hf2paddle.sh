# hf2paddle --tp 2 --fused-ffn --dry-run: PaddleNLP's files for the layout; nothing written.
set -e
ckptconv hf2paddle "$TESTDATA/hf/llama_tiny" out --tp 2 --pp 2 --fused-ffn --dry-run | sed "s|$TESTDATA|TESTDATA|" > plan.txt
test ! -e out
head -n 1 plan.txt
grep "^model_state\|^config.json" plan.txt
grep "  llama.layers.0.mlp.gate_up_fused_proj.weight " plan.txt
