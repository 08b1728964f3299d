# Every PaddleNLP rule here is LLaMA's or Qwen2's: a directory whose config.json names another family
# is refused by each command that reads it as a PaddleNLP model, naming the field; nothing
# written. A config without model_type (older PaddleNLP) is LLaMA's.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
rm -rf in
cp -r "$TESTDATA/paddlenlp/fp32_tp2" in
edit in/config.json model_type '"mistral"'
for cmd in "reshard in out --tp 1" "pd2te in out" "paddle2hf in out" "inspect in" "diff in $TESTDATA/paddlenlp/fp32_tp2" \
    "verify in $TESTDATA/paddlenlp/fp32_tp2"; do
    ckptconv $cmd >/dev/null
    echo "${cmd%% *}: exit $?"
    test ! -e out || echo "out written"
done
edit in/config.json model_type 7
ckptconv reshard in out --tp 1
echo "exit $?"
edit in/config.json model_type --delete
ckptconv reshard in out --tp 1 -q
echo "no model_type: exit $?"
