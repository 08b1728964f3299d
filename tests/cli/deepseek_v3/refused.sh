# What one side cannot say is refused, naming the file and the field or tensor, nothing
# written. config.json: the fixture's rms_norm_eps 1e-5 (transformers normalises MLA's compressed
# q and kv with 1e-6 whatever it says, Megatron with args.norm_epsilon), its routing (top 2 in 2
# of 4 groups: transformers scores a group by its top 2 experts, Megatron by its top
# moe_router_topk / moe_router_group_topk),
# norm_topk_prob false (Megatron's sigmoid router always renormalises a top-k over 1), a softmax
# router, another top-k method, RoPE not interleaved, RoPE neither YaRN nor plain (linear,
# dynamic: the message names the key and value), dense layers among the MoE layers; tensors that do not fit it: q_lora_rank against q_a_proj, first_k_dense_replace
# against the layers' MLPs, n_shared_experts against the shared expert, a missing expert bias
# or shared expert, a layer past num_hidden_layers, an MTP layer's tensors (not converted). Megatron args: no
# expert bias, a dense layer after a MoE layer, a top-k the groups do not fit, norm_epsilon 1e-5.
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
tensor() { python3 "$CLI_DIR/../hf/edit_tensor.py" "$@"; }
set_args() { python3 "$CLI_DIR/../dcp/set_args.py" "$@"; }
rm -rf fixture && cp -r "$TESTDATA/hf/deepseek_v3_tiny" fixture
ckptconv hf2mcore fixture out -q
echo "fixture (rms_norm_eps 1e-5, num_experts_per_tok 2, topk_group 2): exit $?"
test ! -e out || echo "out written"
rm -rf src && cp -r fixture src && edit src/config.json num_experts_per_tok 4 && edit src/config.json rms_norm_eps 1e-6
for change in "num_experts_per_tok 2" "norm_topk_prob false" "scoring_func softmax" "topk_method greedy" "rope_interleave false" \
              "rope_scaling/rope_type linear" "moe_layer_freq 2" "q_lora_rank 8" "first_k_dense_replace 2" \
              "first_k_dense_replace 0" "n_shared_experts 2" "num_experts_per_tok 3"; do
    rm -rf in out && cp -r src in
    # shellcheck disable=SC2086
    edit in/config.json $change
    ckptconv hf2mcore in out -q
    echo "$change: exit $?"
    test ! -e out || echo "out written"
done
python3 "$CLI_DIR/convertible.py" in transformers5/deepseek_v3_tiny
edit in/config.json rope_parameters/rope_type dynamic
ckptconv hf2mcore in out -q
echo "5.24 rope_parameters/rope_type dynamic: exit $?"
l=model.layers
for case in "remove $l.1.mlp.gate.e_score_correction_bias" "remove $l.2.mlp.shared_experts.down_proj.weight" \
            "copy $l.2.input_layernorm.weight $l.3.input_layernorm.weight"; do
    rm -rf in out && cp -r src in
    # shellcheck disable=SC2086
    tensor in/model.safetensors $case
    ckptconv hf2mcore in out -q
    echo "$case: exit $?"
    test ! -e out || echo "out written"
done
# transformers 5.24 writes num_nextn_predict_layers 1 and no MTP tensor: it converts as a model
# without MTP (round_trip.sh); an MTP layer (layer num_hidden_layers + 0) with one tensor is
# refused naming the first it lacks, and --drop leaves it out (mtp.sh converts whole ones)
rm -rf out && python3 "$CLI_DIR/convertible.py" in transformers5/deepseek_v3_tiny
tensor in/model.safetensors copy $l.2.input_layernorm.weight $l.3.enorm.weight
ckptconv hf2mcore in out -q
echo "5.24 with model.layers.3.enorm.weight: exit $?"
ckptconv hf2mcore in out --drop 'model.layers.3.*' -q
echo "the same with --drop 'model.layers.3.*': exit $?"
ckptconv hf2mcore src mc -q || exit 1
for change in moe_router_enable_expert_bias=False "moe_layer_freq=[1, 0, 1]" moe_router_topk=2 norm_epsilon=1e-5; do
    rm -rf m hf && cp -r mc m
    set_args m/iter_0000001/mp_rank_00/model_optim_rng.pt "$change"
    ckptconv mcore2hf m hf -q
    echo "$change: exit $?"
done
