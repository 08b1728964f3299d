"""show_config.py CONFIG_JSON: the fields of a Hugging Face config.json that say which model it is
(family, biases, window, RoPE, experts), one per line as JSON, for comparing a round trip's output."""
import json
import sys

FIELDS = ["architectures", "model_type", "attention_bias", "head_dim", "layer_types", "max_position_embeddings",
          "rope_theta", "rope_scaling", "rope_parameters", "sliding_window", "use_sliding_window",
          "tie_word_embeddings", "torch_dtype", "dtype",
          # mixture of experts (no dense config has these)
          "num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
          "decoder_sparse_step", "router_aux_loss_coef", "router_jitter_noise", "output_router_logits"]

with open(sys.argv[1]) as f:
    cfg = json.load(f)
for k in FIELDS:
    if k in cfg:
        print(f"{k}: {json.dumps(cfg[k], sort_keys=True)}")
