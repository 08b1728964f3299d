# DeepSeek-V3 with a multi-token prediction layer (make_mtp.py) as a torch_dist checkpoint. Its
# moe_layer_freq is a list (a dense first layer), so megatron-core 0.16.1 keys its layers one by
# one, "decoder.layers.<global layer>.<module key>" with no layer axis (transformer_block.py,
# non_homogeneous_layers), each MoE layer's experts one item [num_experts, ...]
# ("decoder.layers.<l>.mlp.experts.experts.<key>"), the MTP layer "mtp.layers.0.<module key>",
# and MLA's local-spec norms under their own names (its layer spec has no keys map):
# testdata/gen/check_mcore_dist_deepseek.py checks these against megatron-core's own save.
# hf2mcore at TP 1 and TP 2 EP 2, local and Transformer Engine names, to torch_dist and back to
# the same layout gives hf2mcore's files byte for byte; mcore2hf of the torch_dist gives the HF
# tensors back (Transformer Engine's _extra_state written as the empty uint8 tensors hf2mcore
# writes). TP 2 EP 2 -> torch_dist -> TP 1 gives hf2mcore's TP 1 files.
set -e
same() { (cd "$1" && find . -type f | sort) | while read -r f; do cmp "$1/$f" "$2/$f"; done; }
python3 "$CLI_DIR/convertible.py" src
python3 "$CLI_DIR/make_mtp.py" src
for impl in local transformer_engine; do
    for layout in "1 1" "2 2"; do
        set -- $layout
        ckptconv hf2mcore src "mc_$1$2" --tp "$1" --ep "$2" --transformer-impl "$impl" -q
        ckptconv reshard "mc_$1$2" "td_$1$2" --to torch_dist -q
        ckptconv reshard "td_$1$2" back --to torch -q && same "mc_$1$2" back && rm -rf back
        ckptconv mcore2hf "td_$1$2" hf -q
        echo "== $impl TP $1 EP $2 -> torch_dist -> legacy: hf2mcore's files; mcore2hf: $(ckptconv diff src hf | tail -1)"
        rm -rf hf
    done
    ckptconv reshard td_22 r --to torch --tp 1 --ep 1 -q && same mc_11 r && rm -rf r
    echo "== $impl TP 2 EP 2 -> torch_dist -> TP 1 EP 1: hf2mcore's files"
    if [ "$impl" = local ]; then
        ckptconv inspect td_22/iter_0000001 | grep -E "^(decoder.layers.[01].(input_layernorm|mlp.linear_fc1|mlp.experts|self_attention.linear_q_down)|mtp.layers.0.(enorm|transformer_layer.mlp.experts.experts.linear_fc1|transformer_layer.self_attention.kv_layernorm))"
    fi
    rm -rf mc_11 mc_22 td_11 td_22
done
