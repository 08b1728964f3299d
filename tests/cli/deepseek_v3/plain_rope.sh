# DeepSeek-V3 without rope_scaling (transformers then runs plain RoPE, softmax scale
# qk_head_dim^-0.5): derived from testdata/hf/deepseek_v3_tiny (num_experts_per_tok 4,
# rms_norm_eps 1e-6, as round_trip.sh) with rope_scaling removed, and set to null. It converts to
# Megatron's MLA with rope_type rope and no YaRN args, and back to the same model.safetensors byte
# for byte with a config.json whose rope_scaling is null; verify passes the Hugging Face files
# against hf2mcore's output. Megatron args with a rope_type that is neither rope nor yarn are
# refused, naming the arg and its value.
set -e
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
args() { python3 "$CLI_DIR/../mixtral/show_args.py" "$@"; }
python3 "$CLI_DIR/convertible.py" src
python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); del d["rope_scaling"]; json.dump(d, open(sys.argv[1], "w"), indent=2)' src/config.json
for layout in "1 1 1" "2 1 2"; do
    set -- $layout
    for impl in local transformer_engine; do
        ckptconv hf2mcore src mc --tp "$1" --pp "$2" --ep "$3" --transformer-impl "$impl" -q
        ckptconv mcore2hf mc hf -q
        cmp src/model.safetensors hf/model.safetensors
        echo "TP $1 EP $3 $impl: the same bytes"
        rm -rf mc hf
    done
done
ckptconv hf2mcore src mc -q
args mc/iter_0000001/mp_rank_00/model_optim_rng.pt rope_type rotary_scaling_factor original_max_position_embeddings \
    beta_fast beta_slow mscale mscale_all_dim
ckptconv mcore2hf mc hf -q
python3 "$CLI_DIR/../hf/show_config.py" hf/config.json | grep -E "^rope"
ckptconv verify src mc --device cpu -q
echo "verify: exit $?"
rm -rf null && cp -r src null
edit null/config.json rope_scaling null
ckptconv verify null mc --device cpu -q
echo "rope_scaling null, verify: exit $?"
set +e
python3 "$CLI_DIR/../reshard/poke_pickle.py" mc/iter_0000001/mp_rank_00/model_optim_rng.pt \
    '(X\x09\x00\x00\x00rope_type(?:\x94|q.|r....)?X\x04\x00\x00\x00)rope' 'nope'
ckptconv mcore2hf mc hf2 -q
echo "args.rope_type nope: exit $?"
