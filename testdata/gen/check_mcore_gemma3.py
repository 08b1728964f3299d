"""Why no megatron-core forward judges a Gemma 3 conversion: builds testdata/hf/transformers5/
gemma3_tiny's model (4 layers, hidden 32, 4 heads / 2 query groups, head_dim 16, GeGLU 64,
zero-centred RMSNorm, q/k norm, window 4 on 3 of 4 layers) with megatron-core 0.16.1's local
layer spec on the CPU (gen_megatron_cpu.py's shims), prints the norms its layer spec has and
what stops the build. Run by hand, output in check_mcore_gemma3.log:

    VENV/bin/python check_mcore_gemma3.py      (VENV: megatron-core 0.16.1, torch 2.10, no Transformer Engine)
"""

import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_megatron_cpu as shim  # noqa: E402


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    import megatron.core
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer import TransformerConfig

    with shim.CudaToCpuMode():
        parallel_state.initialize_model_parallel(1, 1)
        cfg = TransformerConfig(num_layers=4, hidden_size=32, num_attention_heads=4, num_query_groups=2, kv_channels=16,
                                ffn_hidden_size=64, normalization="RMSNorm", layernorm_epsilon=1e-6,
                                layernorm_zero_centered_gamma=True, gated_linear_unit=True, add_bias_linear=False,
                                qk_layernorm=True, softmax_scale=24 ** -0.5, window_size=(3, 0),
                                window_attn_skip_freq=4, use_cpu_initialization=True, params_dtype=torch.float32)
        spec = get_gpt_layer_local_spec(qk_layernorm=True, normalization="RMSNorm")
        print("megatron-core", megatron.core.__version__, "torch", torch.__version__)
        print("the local layer spec's norms:", [f for f in vars(spec.submodules) if "norm" in f],
              "(no post-attention or post-MLP norm)")
        try:
            GPTModel(cfg, spec, vocab_size=128, max_sequence_length=64, position_embedding_type="rope",
                     rotary_base=1000000)
            print("built")
        except AssertionError as e:
            where = traceback.extract_tb(e.__traceback__)[-1]
            print(f"AssertionError: {e} ({where.filename.split('site-packages/')[-1]}:{where.lineno})")


if __name__ == "__main__":
    main()
