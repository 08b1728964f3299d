# What PaddleNLP's Mixtral cannot hold is refused, naming the key, nothing written: hf2paddle
# of a Mixtral with a sliding window (PaddleNLP warns and attends to every token), a tied head,
# RoPE scaling, the fused layouts (PaddleNLP's Mixtral has none) or a pipeline (it has no
# MixtralForCausalLMPipe); a PaddleNLP Mixtral whose config.json says fewer experts than its
# tensors hold, or more.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
for kv in "sliding_window 4096" "tie_word_embeddings true" 'rope_scaling {"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":32}'; do
  rm -rf hf && cp -r "$TESTDATA/hf/mixtral_tiny" hf && chmod -R u+w hf
  edit hf/config.json $kv
  ckptconv hf2paddle hf out -q
  echo "hf2paddle ${kv%% *}: exit $?"
done
cp -r "$TESTDATA/hf/mixtral_tiny" .
for opt in --fused-qkv --fused-ffn "--pp 2"; do
  ckptconv hf2paddle mixtral_tiny out -q $opt
  echo "hf2paddle $opt: exit $?"
done
ckptconv hf2paddle -q "$TESTDATA/hf/mixtral_tiny" pd
for n in 3 5; do
  rm -rf bad && cp -r pd bad
  edit bad/config.json num_local_experts $n
  ckptconv paddle2hf bad out -q
  echo "paddle2hf num_local_experts $n: exit $?"
done
ckptconv reshard pd out --pp 2 -q
echo "reshard --pp 2: exit $?"
test ! -e out
