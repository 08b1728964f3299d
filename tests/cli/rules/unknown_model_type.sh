# A model_type no family knows (falcon) is refused before any weight is read, naming it and the
# known families, by every command that reads a Hugging Face or PaddleNLP config.json.
cp -r "$TESTDATA/hf/llama_tiny" in
python3 "$CLI_DIR/../hf/edit_json.py" in/config.json model_type falcon
ckptconv hf2mcore in out 2>&1; echo "exit $?"
ckptconv hf2paddle in out 2>&1; echo "exit $?"
ckptconv verify in "$TESTDATA/hf/llama_tiny" 2>&1; echo "exit $?"
mkdir pin
cp "$TESTDATA/paddlenlp/fp32_tp2/"* pin/
python3 "$CLI_DIR/../hf/edit_json.py" pin/config.json model_type falcon
ckptconv paddle2hf pin h 2>&1; echo "exit $?"
test ! -e out && test ! -e h
