# A truncated rank file is refused, naming it; nothing is left.
cp -r "$TESTDATA/zero/stage2_bf16_ws2" ckpt
f=ckpt/global_step3/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt
head -c 6000 "$f" > cut && mv cut "$f"
ckptconv zero-to-fp32 ckpt out
echo "exit $?"
ls -A
