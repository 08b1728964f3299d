# float32 against bfloat16: values compared as float64, the change of dtype reported. Values
# bfloat16 holds exactly are equal, and only the dtype differs (exit 1, or 0 with
# --ignore-dtype); a bfloat16 conversion of other values is close within --rtol 1e-2.
python3 "$CLI_DIR/st.py" a.safetensors w:F32:2x2:1,-2.5,0.125,3
python3 "$CLI_DIR/st.py" b.safetensors w:BF16:2x2:1,-2.5,0.125,3
ckptconv diff a.safetensors b.safetensors
echo "exit $?"
ckptconv diff a.safetensors b.safetensors --ignore-dtype -q
echo "ignore-dtype: exit $?"
python3 "$CLI_DIR/st.py" c.safetensors w:F32:3:0.1,0.2,0.3
ckptconv convert -q c.safetensors d.safetensors --dtype bfloat16
ckptconv diff c.safetensors d.safetensors --ignore-dtype | tail -n 4
echo "exact: exit ${PIPESTATUS[0]}"
ckptconv diff c.safetensors d.safetensors --ignore-dtype --rtol 1e-2 -q
echo "rtol 1e-2: exit $?"
