# One element changed: exit 1, the tensor, its first differing index (multi-dimensional),
# the largest absolute and relative difference and the values there; within --atol or
# --rtol it is close, exit 0.
python3 "$CLI_DIR/st.py" a.safetensors w:F32:3x4:i12 x:F32:2:1,2
python3 "$CLI_DIR/st.py" b.safetensors w:F32:3x4:0,0.125,0.25,0.375,0.5,0.625,0.75,0.875,1,1.125,1.75,1.375 x:F32:2:1,2
ckptconv diff a.safetensors b.safetensors
echo "exit $?"
ckptconv diff a.safetensors b.safetensors --atol 0.5 | tail -n 3
echo "atol 0.5: exit ${PIPESTATUS[0]}"
ckptconv diff a.safetensors b.safetensors --rtol 0.3 -q
echo "rtol 0.3: exit $?"
ckptconv diff a.safetensors b.safetensors --rtol 0.25 -q
echo "rtol 0.25: exit $?"
