# --activation takes every activation verify runs, Gemma's gated gelu-tanh (geglu_tanh) among
# them (both sides of a LLaMA run with it still agree); an unknown one is a usage error.
ckptconv verify "$TESTDATA/hf/llama_tiny" "$TESTDATA/hf/llama_tiny" --device cpu -q --layers 1 --activation geglu_tanh
echo "geglu_tanh: exit $?"
ckptconv verify "$TESTDATA/hf/llama_tiny" "$TESTDATA/hf/llama_tiny" --device cpu -q --layers 1 --activation geglu 2>/dev/null
echo "geglu: exit $?"
ckptconv verify --help | grep -e "--activation"
