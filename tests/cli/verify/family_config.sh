# verify reads config.json (and Megatron args that name a family) through the model's family,
# as the conversions read it: a value the family refuses is refused naming the file, the
# field and why, and so is architectures naming another family's class than model_type;
# a key the family has a default for (transformers' own) is taken at it, and a note says so.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
try() { # fixture key value
    rm -rf in && cp -r "$TESTDATA/hf/$1" in && chmod -R u+w in
    edit in/config.json "$2" "$3"
    ckptconv verify in "$TESTDATA/hf/$1" --device cpu -q
    echo "$1 $2: exit $?"
}
try llama_tiny hidden_act gelu
try llama_tiny rope_parameters '{"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0}'
try llama3_tiny rope_scaling '{"type": "linear", "factor": 2.0}'
try mistral_tiny sliding_window '"4"'
try qwen2_tiny use_sliding_window true
try llama_tiny architectures '["Qwen2ForCausalLM"]'
try qwen2_tiny architectures '["MistralForCausalLM"]'
# ... also where one weights file is verified with the config.json beside it
ckptconv verify in/model.safetensors "$TESTDATA/hf/qwen2_tiny" --device cpu -q
echo "qwen2_tiny architectures, one file: exit $?"
# no rms_norm_eps: LlamaConfig's default 1e-6, noted (the two sides then differ in it)
rm -rf in && cp -r "$TESTDATA/hf/llama_tiny" in && chmod -R u+w in
edit in/config.json rms_norm_eps --delete
ckptconv verify in "$TESTDATA/hf/llama_tiny" --device cpu --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["pass"], r["notes"])'
# PaddleNLP: a RoPE scaling of its own (rope_scaling_type) is refused by verify and
# paddle2hf alike.
rm -rf pd && cp -r "$TESTDATA/paddlenlp/fp32_tp2" pd && chmod -R u+w pd
edit pd/config.json rope_scaling_type linear
ckptconv verify pd "$TESTDATA/paddlenlp/fp32_tp2" --device cpu -q
echo "verify rope_scaling_type: exit $?"
ckptconv paddle2hf pd out -q
echo "paddle2hf rope_scaling_type: exit $?"
test ! -e out
# Megatron args whose hf_model_type says qwen2 but that have no add_qkv_bias contradict it.
ckptconv hf2mcore "$TESTDATA/hf/qwen2_tiny" mc -q
for f in mc/iter_*/mp_rank_*/model_optim_rng.pt; do python3 "$CLI_DIR/set_bool_arg.py" "$f" add_qkv_bias false; done
ckptconv verify mc "$TESTDATA/hf/qwen2_tiny" --device cpu -q
echo "megatron qwen2 without add_qkv_bias: exit $?"
