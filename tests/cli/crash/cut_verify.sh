# verify and hf2mcore with a safetensors shard cut short once opened, and verify of a TP
# checkpoint alone with a rank file cut short while mapped.
. "$CLI_DIR/cut.bash"
INPUTS="h mt"
cp -r "$TESTDATA/hf/llama_tiny" h
cut_run h/model-00003-of-00007.safetensors opened verify "$TESTDATA/hf/llama_tiny" h --device cpu
cp "$TESTDATA/hf/llama_tiny/model-00003-of-00007.safetensors" h/
cut_run h/model-00003-of-00007.safetensors opened hf2mcore h out --tp 2
cp -r "$TESTDATA/megatron/tp2" mt
cut_run mt/iter_0000010/mp_rank_00/model_optim_rng.pt map verify mt --device cpu
