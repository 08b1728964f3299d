# Names only one side has, and a shape that changed: listed, exit 1.
python3 "$CLI_DIR/st.py" a.safetensors common:F32:2:1,2 gone:F32:3:1,2,3 s:F32:2x2:1,2,3,4
python3 "$CLI_DIR/st.py" b.safetensors common:F32:2:1,2 new:I64:2:7,8 s:F32:4:1,2,3,4
ckptconv diff a.safetensors b.safetensors
echo "exit $?"
ckptconv diff a.safetensors b.safetensors --all | tail -n 3
echo "all: exit ${PIPESTATUS[0]}"
