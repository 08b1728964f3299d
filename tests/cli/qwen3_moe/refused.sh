# What a Qwen3-MoE config.json says that the conversion does not carry is refused, naming the
# file and the field, nothing written: dense layers (mlp_only_layers, decoder_sparse_step) where
# the files hold experts (dense_layers.sh converts them where the files hold dense MLPs), shared
# experts (Qwen2-MoE's), a window on the layers past max_window_layers. A dense Qwen3 config with experts is refused by the qwen3 family, and a
# Qwen3-MoE's Megatron args without q/k norms are not Qwen3-MoE's.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
set_args() { python3 "$CLI_DIR/../dcp/set_args.py" "$@"; }
src="$TESTDATA/hf/transformers5/qwen3_moe_tiny"
for change in "mlp_only_layers [0]" "decoder_sparse_step 2" "shared_expert_intermediate_size 64" \
              "use_sliding_window true"; do
    rm -rf in out && cp -r "$src" in
    # shellcheck disable=SC2086
    edit in/config.json $change
    ckptconv hf2mcore in out -q
    echo "$change: exit $?"
    test ! -e out || echo "out written"
done
rm -rf in && cp -r "$TESTDATA/hf/transformers5/qwen3_tiny" in
edit in/config.json num_experts 4
ckptconv hf2mcore in out -q
echo "qwen3 with num_experts: exit $?"
ckptconv hf2mcore "$src" mc -q || exit 1
set_args mc/iter_0000001/mp_rank_00/model_optim_rng.pt qk_layernorm=False
ckptconv mcore2hf mc hf -q
echo "qk_layernorm False: exit $?"
