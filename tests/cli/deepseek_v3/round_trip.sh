# DeepSeek-V3 (MLA with YaRN RoPE, layer 0 dense, layers 1-2 of 8 experts with a sigmoid router,
# expert bias and a shared expert) that transformers 4.53 and 5.24 wrote comes back from
# Megatron as itself: the same model.safetensors, tensor for tensor and byte for byte, under
# local and Transformer Engine names at TP 1/2, PP 1/3 and EP 1/2/4. The fixtures route top-2
# in groups of 2 of 4 and have rms_norm_eps 1e-5 (refused.sh: Megatron scores groups otherwise
# and normalises MLA's compressed q and kv with rms_norm_eps, transformers with 1e-6), so each is
# converted with num_experts_per_tok 4 and rms_norm_eps 1e-6, the same weights. Each also made
# 4-layer (layer 3 a copy of layer 2) goes through TP 2 PP 2 EP 2 and comes back tensor for
# tensor. inspect shows a rank's MLA, router and shared expert tensors, the args say MLA, YaRN
# and the routing, and the config.json written back says the same model.
set -e
edit() { python3 "$CLI_DIR/../hf/edit_json.py" "$@"; }
args() { python3 "$CLI_DIR/../mixtral/show_args.py" "$@"; }
for m in deepseek_v3_tiny transformers5/deepseek_v3_tiny; do
    python3 "$CLI_DIR/convertible.py" src "$m"
    for impl in local transformer_engine; do
        for layout in "1 1 1" "2 1 2" "1 3 4" "2 3 2"; do
            set -- $layout
            ckptconv hf2mcore src mc --tp "$1" --pp "$2" --ep "$3" --transformer-impl "$impl" -q
            ckptconv mcore2hf mc hf -q
            cmp src/model.safetensors hf/model.safetensors
            rm -rf mc hf
        done
    done
done
# four layers (layer 3 a copy of layer 2): PP 2 splits them evenly
for m in deepseek_v3_tiny transformers5/deepseek_v3_tiny; do
    rm -rf src4 && cp -r "$TESTDATA/hf/$m" src4
    edit src4/config.json num_experts_per_tok 4
    edit src4/config.json rms_norm_eps 1e-6
    edit src4/config.json num_hidden_layers 4
    names=$(python3 - src4/model.safetensors <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    print(" ".join(k for k in json.loads(f.read(n)) if k.startswith("model.layers.2.")))
PY
)
    for n in $names; do
        python3 "$CLI_DIR/../hf/edit_tensor.py" src4/model.safetensors copy "$n" "model.layers.3.${n#model.layers.2.}"
    done
    for impl in local transformer_engine; do
        ckptconv hf2mcore src4 mc --tp 2 --pp 2 --ep 2 --transformer-impl "$impl" -q
        ckptconv mcore2hf mc hf -q
        echo "== $m, $impl: $(ls mc/iter_0000001 | tr '\n' ' ')"
        ckptconv diff src4 hf | tail -2
        if [ "$m" = deepseek_v3_tiny ]; then
            echo "== TP rank 1, PP stage 1, EP rank 1"
            ckptconv inspect mc/iter_0000001/mp_rank_01_001_001/model_optim_rng.pt |
                grep -E "layers.0.(self_attention|input|pre_mlp|mlp.(router|shared|linear)|mlp.experts.local_experts.[0-3].linear_fc1.weight)"
        fi
        rm -rf mc hf
    done
done
ckptconv hf2mcore src mc -q
args mc/iter_0000001/mp_rank_00/model_optim_rng.pt hf_model_type multi_latent_attention q_lora_rank kv_lora_rank \
    qk_head_dim qk_pos_emb_head_dim v_head_dim kv_channels qk_layernorm norm_epsilon rope_type rotary_base rotary_scaling_factor \
    original_max_position_embeddings beta_fast beta_slow mscale mscale_all_dim ffn_hidden_size num_experts \
    moe_ffn_hidden_size moe_shared_expert_intermediate_size moe_layer_freq moe_router_topk moe_router_score_function \
    moe_router_enable_expert_bias moe_router_num_groups moe_router_group_topk moe_router_topk_scaling_factor \
    moe_router_pre_softmax moe_router_dtype mtp_num_layers
ckptconv mcore2hf mc hf -q
echo "== config.json"
python3 - hf/config.json <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
for k in ["architectures", "model_type", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
          "v_head_dim", "head_dim", "rope_interleave", "rope_theta", "rope_scaling", "rope_parameters",
          "intermediate_size", "moe_intermediate_size", "first_k_dense_replace", "n_routed_experts",
          "num_experts_per_tok", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor",
          "n_shared_experts", "num_nextn_predict_layers"]:
    if k in cfg:
        print(f"{k}: {json.dumps(cfg[k], sort_keys=True)}")
PY
