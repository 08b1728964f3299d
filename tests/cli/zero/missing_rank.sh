# A missing rank file is named; nothing is left under the output name.
cp -r "$TESTDATA/zero/stage3_fp32_ws4" ckpt
rm ckpt/global_step3/zero_pp_rank_2_mp_rank_00_optim_states.pt
ckptconv zero-to-fp32 ckpt out
echo "exit $?"
cp -r "$TESTDATA/zero/stage2_fp32_ws2" ckpt2
rm ckpt2/global_step3/*_optim_states.pt
ckptconv zero-to-fp32 ckpt2 out
echo "exit $?"
ls -A
