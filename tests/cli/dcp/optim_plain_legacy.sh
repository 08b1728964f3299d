# A legacy checkpoint of the non-distributed optimizer written as torch_dist with its state.
# Kept plain: the fixture's torch_dist form is megatron-core's own save of the same run, and
# ours from its legacy twin holds the same items, chunked the same way, every tensor equal bit
# for bit (Adam's moments and common.pt's common_step included). --to-distributed-optimizer
# (dp_reshardable, or fully_reshardable; --optim-format alone too) writes the same bytes as
# going through the legacy distributed optimizer first. The bf16 run (fp32 masters, TP2 PP2)
# the same, its plain form with fp32_param items, and back to legacy every rank file's tensors
# as they were; fp16 (the grad scaler, in common.pt's optimizer) from the fp16 run made plain.
set -e
D="$TESTDATA/megatron/distopt/a_tp2pp1dp1_plain"
B="$TESTDATA/megatron/tp2pp2_bf16_optim"
items() { ckptconv inspect "$1" | awk '/^name /{on=1; next} /^$/{on=0} on' | sort; }
ckptconv reshard -q "$D/legacy" plain --to torch_dist
items plain/iter_0000003 >ours.txt
items "$D/torch_dist/iter_0000003" >megatron.txt
cmp ours.txt megatron.txt && echo "plain: the items of megatron-core's save ($(wc -l <ours.txt)), chunked the same"
ckptconv convert -q plain/iter_0000003 ours.safetensors
ckptconv convert -q "$D/torch_dist/iter_0000003" megatron.safetensors
ckptconv diff ours.safetensors megatron.safetensors --quiet && echo "plain: every tensor equal to megatron-core's"
for f in dp_reshardable fully_reshardable; do
    ckptconv reshard -q "$D/legacy" $f --to torch_dist --to-distributed-optimizer --optim-format $f
done
ckptconv reshard -q "$D/legacy" legacy_dist --to-distributed-optimizer
ckptconv reshard -q legacy_dist via_dp --to torch_dist
ckptconv reshard -q legacy_dist via_fully --to torch_dist --optim-format fully_reshardable
diff -r dp_reshardable via_dp && echo "dp_reshardable: the bytes of legacy distributed -> torch_dist"
diff -r fully_reshardable via_fully && echo "fully_reshardable: the bytes of legacy distributed -> torch_dist"
# --optim-format alone asks for the distributed optimizer, and args say so
ckptconv reshard -q "$D/legacy" format_only --to torch_dist --optim-format fully_reshardable
diff -r format_only via_fully && echo "--optim-format alone: the same bytes, args included"
ckptconv verify -q "$D/legacy" dp_reshardable --optimizer --device cpu --tokens 4
# bf16: fp32 masters from fp32_from_fp16_params
ckptconv reshard -q "$B" bf16 --to torch_dist
ckptconv inspect bf16/iter_0000010 | grep -c '^optimizer\.state\.fp32_param\.'
ckptconv verify -q "$B" bf16 --optimizer --device cpu --tokens 4
ckptconv reshard -q bf16 bf16_back --to-optimizer plain --tp 2 --pp 2
n=0
for f in "$B"/iter_*/mp_rank_*/*.pt; do
    rel=${f#"$B"/}
    ckptconv diff -q "$f" "bf16_back/$rel" --exclude 'rng_state/*'
    n=$((n + 1))
done
echo "bf16 -> torch_dist -> legacy: $n rank files' tensors as they were (no rng state)"
ckptconv reshard -q "$B" bf16_dist --to torch_dist --to-distributed-optimizer
ckptconv reshard -q "$B" bf16_legacy_dist --to-distributed-optimizer
ckptconv reshard -q bf16_legacy_dist bf16_via --to torch_dist
diff -r bf16_dist bf16_via && echo "bf16 dp_reshardable: the bytes of legacy distributed -> torch_dist"
ckptconv verify -q "$B" bf16_dist --optimizer --device cpu --tokens 4
# fp16: the plain form of megatron-core's fp16 run, its grad scaler kept
F="$TESTDATA/megatron/distopt/f_tp1pp1dp3_fp16_inst3/legacy"
ckptconv reshard -q "$F" fp16_plain --to-optimizer plain
ckptconv reshard -q fp16_plain fp16 --to torch_dist
ckptconv inspect fp16/iter_0000003/common.pt | grep '^optimizer/'
ckptconv verify -q "$F" fp16 --optimizer --device cpu --tokens 4
ckptconv reshard -q fp16_plain fp16_dist --to torch_dist --to-distributed-optimizer
ckptconv reshard -q fp16_plain fp16_legacy_dist --to-distributed-optimizer
ckptconv reshard -q fp16_legacy_dist fp16_via --to torch_dist
diff -r fp16_dist fp16_via && echo "fp16 dp_reshardable: the bytes of legacy distributed -> torch_dist"
# a target layout of its own: TP1 PP1 at DP2
ckptconv reshard -q "$B" bf16_tp1 --to torch_dist --tp 1 --pp 1 --to-distributed-optimizer --dp 2
ckptconv verify -q "$B" bf16_tp1 --optimizer --device cpu --tokens 4
# a distributed optimizer's run without its distrib_optim.pt is refused naming it, not taken
# for a plain one
cp -r "$TESTDATA/megatron/distopt/a_tp2pp1dp2_buckets/legacy" nodist
find nodist -name distrib_optim.pt -delete
ckptconv reshard -q nodist bad --to torch_dist 2>&1 || echo "exit $?"
