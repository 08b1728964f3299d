# A tensor larger than a piece (--memory 16M over 8 threads: pieces of 87381 elements, 16M
# bytes / 8 threads / 24 bytes an element): the first difference is found at the start of
# the second piece, whichever thread reads it first, and every difference is counted; one
# thread (one piece) says the same.
python3 "$CLI_DIR/st.py" a.safetensors big:F32:3x100000:i300000
cp a.safetensors b.safetensors
python3 "$CLI_DIR/poke.py" b.safetensors big 299999 -1
python3 "$CLI_DIR/poke.py" b.safetensors big 87381 -1
python3 "$CLI_DIR/poke.py" b.safetensors big 174761 -1
for threads in 8 1; do
    ckptconv diff a.safetensors b.safetensors --memory 16M --threads $threads | tail -n 4
    echo "threads $threads: exit ${PIPESTATUS[0]}"
done
