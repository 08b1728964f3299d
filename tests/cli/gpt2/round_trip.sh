# GPT-2 models that transformers 4 and 5 wrote come back from Megatron-LM at TP 2 PP 2, with
# local and Transformer Engine layer names, as themselves: the same model.safetensors, a
# GPT2LMHeadModel config.json, and verify finds the Megatron checkpoint and the model
# written back equal to the source.
set -e
show() {
    python3 - "$1" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
for k in ["architectures", "model_type", "activation_function", "n_embd", "n_head", "n_inner", "n_layer",
          "n_positions", "layer_norm_epsilon", "vocab_size", "bos_token_id", "eos_token_id",
          "tie_word_embeddings", "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"]:
    print(f"{k}: {json.dumps(cfg.get(k, '<absent>'))}")
PY
}
for m in gpt2 transformers5/gpt2; do
    src="$TESTDATA/hf/${m}_tiny"
    for impl in local transformer_engine; do
        ckptconv hf2mcore "$src" mc --tp 2 --pp 2 --transformer-impl "$impl" -q
        ckptconv mcore2hf mc hf -q
        cmp "$src/model.safetensors" hf/model.safetensors
        echo "== $m $impl"
        ckptconv verify "$src" mc -q
        ckptconv verify "$src" hf -q
        rm -rf mc hf
    done
    ckptconv hf2mcore "$src" mc --tp 2 -q
    ckptconv mcore2hf mc hf -q
    show hf/config.json
    rm -rf mc hf
done
