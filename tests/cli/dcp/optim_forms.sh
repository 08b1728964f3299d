# The distributed optimizer's two torch_dist forms: the plain optimizer of distopt/a_tp2pp1dp1_plain
# becomes fully_reshardable at TP1 (masters = the fp32 weights, step into each param group),
# that becomes dp_reshardable at TP2 (buckets laid out from args, DP 1), that
# fully_reshardable again at the same TP2 layout, and that dp_reshardable (the source's form
# by default): both forms come back tensor for tensor (compared as plain tensor files).
src="$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain/torch_dist"
ckptconv reshard -q "$src" fully --tp 1 --to torch_dist --optim-format fully_reshardable
ckptconv reshard -q fully dp --tp 2 --to torch_dist --optim-format dp_reshardable
ckptconv reshard -q dp fully2 --tp 2 --to torch_dist --optim-format fully_reshardable
ckptconv reshard -q fully2 dp2 --tp 2 --to torch_dist --optim-format dp_reshardable
ckptconv reshard -q dp2 dp3 --tp 2 --to torch_dist
ckptconv inspect fully/iter_0000003 | grep -c '^optimizer\.state\.param\.'
ckptconv inspect dp/iter_0000003 | grep -oE '^optimizer\.distributed\.[^ ]+ [^ ]+' | sort
for d in fully fully2 dp dp2 dp3; do ckptconv convert -q $d/iter_0000003 $d.safetensors; done
ckptconv diff fully.safetensors fully2.safetensors --quiet && echo "fully -> dp -> fully: equal"
ckptconv diff dp.safetensors dp2.safetensors --quiet && echo "dp -> fully -> dp: equal"
ckptconv diff dp2.safetensors dp3.safetensors --quiet && echo "dp -> dp: equal"
ckptconv diff fully.safetensors dp.safetensors --names-only | tail -1
