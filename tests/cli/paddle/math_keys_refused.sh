# PaddleNLP config keys that change the math no Hugging Face LLaMA or Qwen2 computes (ALiBi
# instead of RoPE; its long-sequence RoPE strategies) are refused by paddle2hf and verify,
# naming the key, not converted as if they were unset; nothing is written. reshard keeps a
# PaddleNLP model PaddleNLP's: the config goes along, so the math does too.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
for key in alibi use_long_sequence_strategies; do
  rm -rf pd out && cp -r "$TESTDATA/paddlenlp/fp32_tp2" pd && chmod -R u+w pd
  edit pd/config.json "$key" true
  ckptconv paddle2hf pd out -q
  echo "paddle2hf $key: exit $?"
  test ! -e out || echo "paddle2hf $key: wrote out"
  ckptconv verify pd "$TESTDATA/paddlenlp/fp32_tp2" --device cpu -q
  echo "verify $key: exit $?"
  ckptconv reshard pd out --tp 1 -q
  echo "reshard $key: exit $?"
  python3 -c 'import json, sys; print(sys.argv[1], json.load(open("out/config.json"))[sys.argv[1]])' "$key"
done
