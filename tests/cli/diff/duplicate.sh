# A name two shards of a Hugging Face directory hold (one the index does not point to) is
# an error naming both files and the tensor, exit 1, whichever side it is on: never one of
# the two copies taken silently.
cp -r "$TESTDATA/hf/llama_tiny" dup
chmod -R u+w dup
python3 "$CLI_DIR/dup.py" dup model.norm.weight
ckptconv diff dup "$TESTDATA/hf/llama_tiny"
echo "exit $?"
ckptconv diff "$TESTDATA/hf/llama_tiny" dup --names-only
echo "as B, names only: exit $?"
