"""Runs Megatron-LM's checkpoint converter (tools/checkpoint/convert.py) on a machine without
Transformer Engine or a GPU, for tests/bench/hf2mcore.sh.

    megatron_convert.py MEGATRON_LM [convert.py arguments ...]

MEGATRON_LM is a Megatron-LM source tree (core_v0.16.1 has tools/checkpoint/
loader_llama_mistral.py; later trees dropped it). convert.py runs unchanged as __main__; before
that, this wrapper changes what stops it here, none of which touches a weight:

- every argument list Megatron parses (the loader and the saver build their own) gets
  --no-rope-fusion, --no-gradient-accumulation-fusion and --no-bias-swiglu-fusion, fusions
  that need Transformer Engine or Apex's CUDA extensions, and apply_layernorm_1p = False,
  which the legacy model the llama_mistral loader builds still reads and core_v0.16's
  arguments no longer define;
- without a GPU: torch.cuda.current_device() is "cpu" (the legacy model's RoPE buffer),
  validate_args' GPU architecture query answers 0, and torch.cuda.get_rng_state() an empty
  state (save_checkpoint collects it even with the --no-save-rng the savers pass);
  CUDA_DEVICE_MAX_CONNECTIONS=1 as Megatron's launch scripts export it (validate_args wants
  it with TP > 1);
- the saver's assertion that Transformer Engine >= 0.12 is installed, which
  --saver-transformer-impl local does not use, passes;
- the saver's fake process groups: it fakes the tensor and expert parallel groups only, while
  mcore's GPTModel asks for all of them (ProcessGroupCollection.use_mpu_process_groups), and
  mcore's layers read a group's size only once torch.distributed is initialized
  (megatron.core.utils.get_pg_size; otherwise every rank's model is built at TP 1 and the
  saver stops on a shape mismatch). The saver gets a one-process gloo group, a pipeline group
  that follows the stage it builds, and groups of one rank for the rest (a conversion has no
  data or context parallelism). These two stop core_v0.16.1's `--saver core` on any machine,
  as far as its code shows.

The saver process is forked from this one, so it inherits all of it.
"""

import os
import runpy
import sys
import tempfile


# fusions that need Transformer Engine or Apex's CUDA extensions; none changes a weight
CPU_FLAGS = ("--no-rope-fusion", "--no-gradient-accumulation-fusion", "--no-bias-swiglu-fusion")


def main():
    if len(sys.argv) < 2 or not os.path.isfile(os.path.join(sys.argv[1], "tools", "checkpoint", "convert.py")):
        sys.exit("usage: megatron_convert.py MEGATRON_LM [convert.py arguments ...] "
                 "(MEGATRON_LM: a Megatron-LM tree with tools/checkpoint/convert.py)")
    root = os.path.abspath(sys.argv[1])
    tools = os.path.join(root, "tools", "checkpoint")
    sys.path[:0] = [tools, root]

    import torch
    import megatron.training.arguments as arguments

    parse_args = arguments.parse_args

    def parse_args_for_cpu(*args, **kwargs):
        sys.argv += [f for f in CPU_FLAGS if f not in sys.argv]
        ns = parse_args(*args, **kwargs)
        # the legacy model still reads it; core_v0.16's arguments no longer define it
        if not hasattr(ns, "apply_layernorm_1p"):
            ns.apply_layernorm_1p = False
        return ns

    arguments.parse_args = parse_args_for_cpu
    if not torch.cuda.is_available():
        # the legacy model the llama_mistral loader builds puts RoPE's inv_freq on
        # torch.cuda.current_device() (RotaryEmbedding without use_cpu_initialization)
        torch.cuda.current_device = lambda: "cpu"
        # validate_args asks the GPU's architecture when TP > 1 (for a warning about
        # CUDA_DEVICE_MAX_CONNECTIONS)
        arguments.get_device_arch_version = lambda: 0
        # save_checkpoint collects the rng states even with --no-save-rng, which the
        # savers pass: the CUDA one is never written
        torch.cuda.get_rng_state = lambda *a, **k: torch.zeros(0, dtype=torch.uint8)
    # what Megatron's launch scripts export; validate_args requires it with TP > 1
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    # the saver asserts Transformer Engine >= 0.12 is installed, also for
    # --saver-transformer-impl local, which does not use it
    import saver_base

    version = saver_base.version
    saver_base.version = lambda name: "0.12.0" if name == "transformer-engine" else version(name)

    # the saver fakes the tensor and expert parallel groups only; mcore's GPTModel asks for
    # all of them (ProcessGroupCollection.use_mpu_process_groups): the pipeline group follows
    # the stage the saver is building, the others are groups of one rank (a conversion has
    # no data or context parallelism)
    from megatron.core import parallel_state
    from utils import _ConverterFakeProcessGroup

    class PipelineGroup(_ConverterFakeProcessGroup):
        def rank(self):
            return parallel_state.get_pipeline_model_parallel_rank()

        def size(self):
            return parallel_state.get_pipeline_model_parallel_world_size()

    init_env = saver_base.MegatronCheckpointSaverBase.initialize_megatron_env

    def initialize_megatron_env(self):
        init_env(self)
        # mcore layers take their TP size from their group only once torch.distributed is
        # initialized (megatron.core.utils.get_pg_size): without it every rank's model is
        # built at TP 1. A one-process gloo group makes them read the fake groups' sizes.
        if not torch.distributed.is_initialized():
            with tempfile.NamedTemporaryFile(prefix="megatron_convert_") as f:
                torch.distributed.init_process_group("gloo", init_method=f"file://{f.name}", rank=0,
                                                     world_size=1)
        parallel_state._PIPELINE_MODEL_PARALLEL_GROUP = PipelineGroup()
        for name in dir(parallel_state):
            if name.startswith("_") and "_GROUP" in name and getattr(parallel_state, name) is None:
                setattr(parallel_state, name, _ConverterFakeProcessGroup(size=1))

    saver_base.MegatronCheckpointSaverBase.initialize_megatron_env = initialize_megatron_env

    sys.argv = [os.path.join(tools, "convert.py")] + sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
