# The same tensors are equal, exit 0, whatever the formats: a file against itself, a torch
# file against its safetensors conversion, a sharded safetensors directory against one file.
python3 "$CLI_DIR/st.py" a.safetensors w:F32:2x3:1,2,3,4,5,6 b:F32:4:nan,1,inf,-2
ckptconv diff a.safetensors a.safetensors
echo "exit $?"
ckptconv convert -q "$TESTDATA/sample/tiny_llama.pt" tiny.safetensors
ckptconv diff -q "$TESTDATA/sample/tiny_llama.pt" tiny.safetensors
echo "pt against safetensors: exit $?"
ckptconv convert -q "$TESTDATA/safetensors/sharded" one.pt
ckptconv diff -q "$TESTDATA/safetensors/sharded" one.pt
echo "sharded against one file: exit $?"
