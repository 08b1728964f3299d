# No output inside an input directory, nor the input directory itself, for any command:
# a usage error (2), and nothing is written into the input.
cp -r "$TESTDATA/dcp" D
ckptconv convert D D/o.safetensors
echo "convert exit $?"
ckptconv convert D D/sub/o.safetensors --force
echo "convert exit $?"
ln -s D Dlink
ckptconv convert Dlink D/o.safetensors
echo "convert exit $?"
cp -r "$TESTDATA/megatron/tp2" M
ckptconv reshard M M/tp1 --tp 1 -q
echo "reshard exit $?"
ckptconv reshard M M --tp 1 -q --force
echo "reshard exit $?"
ckptconv mcore2hf M M/hf -q
echo "mcore2hf exit $?"
# with --force an output directory that holds the input is written into, but never over it
ckptconv reshard M/iter_0000010 M --tp 2 -q --force
echo "reshard exit $?"
cp -r "$TESTDATA/paddlenlp/fp32_tp2" P
ckptconv reshard P P/tp1 --tp 1 -q
echo "reshard exit $?"
ckptconv paddle2hf P P/hf -q
echo "paddle2hf exit $?"
ckptconv pd2te P P/te -q
echo "pd2te exit $?"
cp -r "$TESTDATA/zero/stage1_bf16_ws2" Z
ckptconv zero-to-fp32 Z Z/fp32 -q
echo "zero-to-fp32 exit $?"
ckptconv convert Z Z/pytorch_model.bin -q
echo "convert exit $?"
cp -r "$TESTDATA/hf/llama_tiny" H
ckptconv hf2mcore H H/mcore -q
echo "hf2mcore exit $?"
ckptconv hf2paddle H H/pd -q
echo "hf2paddle exit $?"
diff -r D "$TESTDATA/dcp" && diff -r M "$TESTDATA/megatron/tp2" && diff -r P "$TESTDATA/paddlenlp/fp32_tp2" &&
    diff -r Z "$TESTDATA/zero/stage1_bf16_ws2" && diff -r H "$TESTDATA/hf/llama_tiny" && echo "inputs unchanged"
ls -A
