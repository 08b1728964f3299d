# Llama 3.2 (tied embeddings, llama3 RoPE scaling factor 32) that transformers 4 and 5 wrote
# comes back from Megatron (TP 2 PP 2, local and Transformer Engine names) as itself: the
# same model.safetensors, a config.json of the family (rope_scaling / rope_parameters,
# tie_word_embeddings), and verify finds each side equal to the source, the Megatron one run
# as its tensor-parallel ranks.
set -e
show() { python3 "$CLI_DIR/../hf/show_config.py" "$@"; }
for m in llama32 transformers5/llama32; do
    src="$TESTDATA/hf/${m}_tiny"
    for impl in local transformer_engine; do
        ckptconv hf2mcore "$src" mc --tp 2 --pp 2 --transformer-impl "$impl" -q
        ckptconv mcore2hf mc hf -q
        cmp "$src/model.safetensors" hf/model.safetensors
        echo "== $m $impl"
        ls mc/iter_0000001
        show hf/config.json
        ckptconv verify "$src" mc -q
        ckptconv verify "$src" hf -q
        rm -rf mc hf
    done
done
