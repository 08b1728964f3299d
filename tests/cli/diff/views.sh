# torch .pt tensors that are views (names sharing one storage at their own offset and
# strides: a transpose, a column, a narrow of a transpose, a 0-d element, an expand) are
# compared as the values each name holds: equal to their contiguous safetensors copy; one
# element changed in the copy of a view is found at its index in that view, and the base
# whose storage the view shares on the other side stays equal. Scalars, 0-element tensors,
# bool and float8 likewise.
ckptconv convert -q "$TESTDATA/torch/views.pt" views.safetensors
ckptconv diff "$TESTDATA/torch/views.pt" views.safetensors | tail -n 2
echo "exit ${PIPESTATUS[0]}"
python3 "$CLI_DIR/poke.py" views.safetensors narrow_of_transpose 3 1000
ckptconv diff "$TESTDATA/torch/views.pt" views.safetensors | tail -n 5
echo "one element of a view: exit ${PIPESTATUS[0]}"
for f in torch/scalars torch2/fp8 torch2/unsigned torch2/views; do
    ckptconv convert -q "$TESTDATA/$f.pt" "${f#*/}-${f%/*}.safetensors"
    ckptconv diff -q "$TESTDATA/$f.pt" "${f#*/}-${f%/*}.safetensors"
    echo "$f: exit $?"
done
