# Rank files that do not belong together (another run's files): the counts are named.
cp -r "$TESTDATA/zero/stage2_fp32_ws2" ckpt
cp "$TESTDATA/zero/stage2_fp32_ws2_untied/global_step3/mp_rank_00_model_states.pt" ckpt/global_step3/
ckptconv zero-to-fp32 ckpt out
echo "exit $?"
cp -r "$TESTDATA/zero/stage3_fp32_ws2" ckpt3
for r in 0 1; do
  cp "$TESTDATA/zero/stage3_bf16_ws2_untied/global_step3/zero_pp_rank_${r}_mp_rank_00_model_states.pt" ckpt3/global_step3/
done
ckptconv zero-to-fp32 ckpt3 out
echo "exit $?"
cp -r "$TESTDATA/zero/stage3_fp32_ws2" ckpt4
cp "$TESTDATA/zero/stage3_fp32_ws4/global_step3/zero_pp_rank_1_mp_rank_00_optim_states.pt" ckpt4/global_step3/
ckptconv zero-to-fp32 ckpt4 out
echo "exit $?"
ls -A
