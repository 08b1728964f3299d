# An input that cannot be read is a failure, exit 1, naming it and why.
python3 "$CLI_DIR/st.py" a.safetensors w:F32:1:1
ckptconv diff a.safetensors missing.safetensors
echo "exit $?"
ckptconv diff "$TESTDATA/bad/truncated.pt" a.safetensors 2>&1 | sed "s|$TESTDATA|TESTDATA|"
echo "exit ${PIPESTATUS[0]}"
mkdir empty
ckptconv diff empty a.safetensors
echo "exit $?"
head -c 20 a.safetensors > cut.safetensors
ckptconv diff a.safetensors cut.safetensors
echo "exit $?"
