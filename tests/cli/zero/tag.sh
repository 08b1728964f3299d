# --tag/-t picks the tag directory instead of `latest`; a missing tag is an error.
set -e
mkdir ckpt
cp -r "$TESTDATA/zero/stage1_fp32_ws2/global_step3" ckpt/global_step7
printf 'global_step99' > ckpt/latest
ckptconv zero-to-fp32 -q -t global_step7 ckpt out1
ckptconv zero-to-fp32 -q --tag=global_step7 ckpt out2
cmp out1/pytorch_model.bin out2/pytorch_model.bin
ls out1
set +e
ckptconv zero-to-fp32 -q ckpt out3
echo "exit $?"
ckptconv zero-to-fp32 -q --tag global_step8 ckpt out4
echo "exit $?"
ls
