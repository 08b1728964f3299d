# Directories that are not ZeRO checkpoints, and model-states files that are not ZeRO's.
mkdir plain
cp "$TESTDATA/torch/basic.pt" plain/
ckptconv zero-to-fp32 plain out
echo "exit $?"
mkdir -p fake/global_step1
printf global_step1 > fake/latest
cp "$TESTDATA/torch/basic.pt" fake/global_step1/mp_rank_00_model_states.pt
cp "$TESTDATA/torch/basic.pt" fake/global_step1/zero_pp_rank_0_mp_rank_00_optim_states.pt
ckptconv zero-to-fp32 fake out
echo "exit $?"
ls
