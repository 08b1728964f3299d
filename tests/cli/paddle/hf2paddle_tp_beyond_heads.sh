# hf2paddle to a layout PaddleNLP's LLaMA cannot run is refused, naming the Hugging Face config
# and the constraint; nothing is written.
ckptconv hf2paddle "$TESTDATA/hf/llama_tiny" out --tp 8
status=$?
test ! -e out || echo "out was written"
exit $status
