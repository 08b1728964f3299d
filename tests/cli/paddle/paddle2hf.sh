# paddle2hf: a Hugging Face directory from any PaddleNLP layout.
ckptconv paddle2hf "$TESTDATA/paddlenlp/bf16_tp2pp2" out --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["command"], [(f["path"], f["tensors"]) for f in r["files"]])'
grep -E '"(torch_dtype|num_key_value_heads|rms_norm_eps|vocab_size)"' out/config.json
