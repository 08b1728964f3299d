# --dry-run: every output file with its tensors and how each is computed; nothing written.
set -e
ckptconv reshard "$TESTDATA/megatron/tp1" out --tp 2 --pp 2 --dry-run > plan.txt
test ! -e out
head -n 1 plan.txt
grep -c "model_optim_rng.pt (torch" plan.txt
grep "mp_rank_01_000/" plan.txt
grep "latest_checkpointed_iteration.txt" plan.txt
grep "model/decoder.layers.1.mlp.linear_fc1.weight " plan.txt | head -n 2
grep -c "model/decoder.layers.0\." plan.txt
