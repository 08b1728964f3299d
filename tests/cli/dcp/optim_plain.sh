# The non-distributed optimizer of a torch_dist checkpoint (fp32: the weights are the masters,
# no fp32_param keys) resharded TP2 -> TP1 -> TP2 as torch_dist: its plain form kept, every
# tensor given back, Adam moments and common.pt's step (optimizer/state/common_step) included
# (compared as plain tensor files: diff of the directories compares the model only).
src="$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/torch_dist"
ckptconv reshard -q "$src" tp1 --tp 1 --to torch_dist
ckptconv reshard -q tp1 back --tp 2 --to torch_dist
ckptconv inspect tp1/iter_0000003 | grep -c '^optimizer\.state\.exp_avg'
ckptconv inspect tp1/iter_0000003 | grep -c 'fp32_param' || true
ckptconv convert -q "$src/iter_0000003" src.safetensors
ckptconv convert -q back/iter_0000003 back.safetensors
ckptconv convert -q tp1/iter_0000003 tp1.safetensors
ckptconv diff src.safetensors back.safetensors --quiet && echo "round trip: every tensor equal"
ckptconv diff src.safetensors tp1.safetensors --quiet && echo "tp1: every tensor equal at global shape"
