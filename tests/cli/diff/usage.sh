# Usage errors exit 2 and name the problem.
ckptconv diff a
echo "exit $?"
ckptconv diff a b c
echo "exit $?"
ckptconv diff a b --rtol -1
echo "exit $?"
ckptconv diff a b --atol nan
echo "exit $?"
ckptconv diff a b --frobnicate
echo "exit $?"
ckptconv diff a b --param x=1
echo "exit $?"
ckptconv diff a b --threads 0
echo "exit $?"
python3 "$CLI_DIR/st.py" a.safetensors w:F32:1:1
ckptconv diff a.safetensors a.safetensors --map no_such_map
echo "exit $?"
ckptconv diff a.safetensors a.safetensors --map hf_llama_megatron --param padded_vocab_size
echo "exit $?"
ckptconv diff --help > help.txt
rc=$?
head -n 1 help.txt
echo "exit $rc"
