# --dry-run: every output file and tensor with its sources; nothing written.
set -e
ckptconv reshard "$TESTDATA/paddlenlp/fp32_tp2" out --tp 1 --pp 2 --dry-run | sed "s|$TESTDATA|TESTDATA|" > plan.txt
test ! -e out
head -n 1 plan.txt
grep -c "(pdparams" plan.txt
grep "^model_state.pp01.pdparams\|^optimizer.pp00.pdopt\|^config.json" plan.txt
grep "  llama.layers.3.mlp.gate_up_fused_proj.weight " plan.txt
