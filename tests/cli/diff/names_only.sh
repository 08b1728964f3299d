# --names-only reads no tensor data: changed values go unnoticed, names, dtypes and shapes not.
python3 "$CLI_DIR/st.py" a.safetensors w:F32:2:1,2 v:F32:2:1,2
python3 "$CLI_DIR/st.py" b.safetensors w:F32:2:5,6 v:F64:2:1,2
ckptconv diff a.safetensors b.safetensors --names-only
echo "exit $?"
python3 "$CLI_DIR/st.py" c.safetensors w:F32:2:5,6 v:F32:2:7,8
ckptconv diff a.safetensors c.safetensors --names-only -q
echo "values changed: exit $?"
