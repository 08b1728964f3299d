"""CPU shims that let Megatron-LM (megatron-core 0.16.1 + megatron/training at tag core_v0.16.1)
build, train (optimizer steps), save and run forward passes without a GPU.

Only device placement is changed, never the math:

- `CudaToCpuMode` (a TorchFunctionMode): a `device=` argument that names CUDA (`'cuda'`,
  `'cuda:0'`, `torch.device('cuda')`, an int ordinal) becomes `'cpu'`; `Tensor.cuda()` returns
  the tensor itself; `Tensor.to('cuda'...)` stays on the CPU; `Tensor.pin_memory()` is a no-op.
- `torch.cuda.*` helpers that have no CPU meaning become no-ops or CPU answers
  (`current_device` -> 'cpu', streams/events -> dummies, `synchronize`/`empty_cache` -> no-op,
  memory statistics -> 0, `get_device_properties` -> compute capability 9.0).
- The CUDA random generator, which does not exist here, is emulated: `torch.cuda.manual_seed`,
  `get_rng_state`, `set_rng_state` (and Megatron's `_get_cuda_rng_state`/`_set_cuda_rng_state`)
  keep a 16-byte uint8 state laid out as PyTorch's CUDA Philox generator state
  (`CUDAGeneratorImpl::get_state`: uint64 seed, then int64 offset, little endian). So
  `rng_state/0/cuda_rng_state` and `rng_tracker_states` in a checkpoint have the type, size and
  seeds a GPU run writes right after `model_parallel_cuda_manual_seed` (offset 0); nothing here
  draws from it (dropout is 0, and CPU dropout would use the CPU generator anyway).
- `cuda_type_names()`: inside this context `Tensor.type()` (no argument) answers
  `'torch.cuda.<T>Tensor'` for CPU tensors; `Float16OptimizerWithFloat16Params.__init__` only
  accepts parameters whose `type()` is a CUDA type name, and `clip_grad_by_total_norm_fp32`
  asserts `param.grad.type() == 'torch.cuda.FloatTensor'`: install() wraps those two only.
"""

import contextlib
import struct
import types

import torch
from torch.overrides import TorchFunctionMode


def _is_cuda_device(d):
    if d is None:
        return False
    if isinstance(d, bool):
        return False
    if isinstance(d, int):
        return True
    if isinstance(d, str):
        return d.startswith("cuda")
    if isinstance(d, torch.device):
        return d.type == "cuda"
    return False


class CudaToCpuMode(TorchFunctionMode):
    """Maps CUDA device arguments to the CPU (see module docstring)."""

    cuda_type_names = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.cuda, torch.Tensor.pin_memory):
            return args[0]
        if func is torch.Tensor.type and self.cuda_type_names and len(args) == 1 and not kwargs:
            name = func(*args)
            if name.startswith("torch.") and not name.startswith("torch.cuda."):
                name = "torch.cuda." + name[len("torch."):]
            return name
        if "device" in kwargs and _is_cuda_device(kwargs["device"]):
            kwargs["device"] = "cpu"
        if func in (torch.Tensor.to,):
            args = tuple("cpu" if (i > 0 and _is_cuda_device(a)) else a for i, a in enumerate(args))
        if "non_blocking" in kwargs and func is torch.Tensor.to:
            kwargs["non_blocking"] = False
        return func(*args, **kwargs)


class _DummyStream:
    def __init__(self, *a, **k):
        pass

    def wait_stream(self, *a, **k):
        pass

    def wait_event(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def record_event(self, *a, **k):
        return _DummyEvent()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


class _DummyEvent:
    def __init__(self, *a, **k):
        pass

    def record(self, *a, **k):
        pass

    def wait(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True

    def elapsed_time(self, other):
        return 0.0


class FakeCudaRng:
    """Emulated CUDA Philox generator state: 16 bytes = uint64 seed + int64 offset (LE)."""

    def __init__(self, seed=0):
        self.state = self.pack(seed, 0)

    @staticmethod
    def pack(seed, offset):
        b = struct.pack("<Qq", seed & 0xFFFFFFFFFFFFFFFF, offset)
        return torch.frombuffer(bytearray(b), dtype=torch.uint8).clone()

    def manual_seed(self, seed):
        self.state = self.pack(int(seed), 0)

    def get_state(self):
        return self.state.clone()

    def set_state(self, s):
        assert s.dtype == torch.uint8 and s.numel() == 16, s
        self.state = s.clone()


_RNG = FakeCudaRng()
_MODE = None


def install():
    """Patch torch.cuda / megatron for CPU; returns the active CudaToCpuMode."""
    global _MODE
    if _MODE is not None:
        return _MODE
    c = torch.cuda
    c.current_device = lambda: "cpu"
    c.set_device = lambda *a, **k: None
    c.Stream = _DummyStream
    c.Event = _DummyEvent
    c.current_stream = lambda *a, **k: _DummyStream()
    c.default_stream = lambda *a, **k: _DummyStream()
    c.stream = lambda s=None: contextlib.nullcontext()
    c.synchronize = lambda *a, **k: None
    c.empty_cache = lambda: None
    c.memory_allocated = lambda *a, **k: 0
    c.max_memory_allocated = lambda *a, **k: 0
    c.memory_reserved = lambda *a, **k: 0
    c.max_memory_reserved = lambda *a, **k: 0
    c.reset_peak_memory_stats = lambda *a, **k: None
    # validate_args asks for the compute capability (get_device_arch_version); answer Hopper (9),
    # which keeps the pre-Blackwell checks (CUDA_DEVICE_MAX_CONNECTIONS=1 with TP > 1).
    c.get_device_properties = lambda *a, **k: types.SimpleNamespace(
        major=9, minor=0, name="CPU (gen_megatron_cpu)", total_memory=0, multi_processor_count=0)
    c.manual_seed = lambda seed: _RNG.manual_seed(seed)
    c.manual_seed_all = lambda seed: _RNG.manual_seed(seed)
    c.get_rng_state = lambda device="cuda": _RNG.get_state()
    c.set_rng_state = lambda s, device="cuda": _RNG.set_state(s)

    from megatron.core.tensor_parallel import random as mrandom

    def _get_cuda_rng_state(device="cuda", clone=False, graph_safe=False):
        assert not graph_safe
        return _RNG.get_state()

    def _set_cuda_rng_state(new_state, device=-1, graph_safe=False):
        assert not graph_safe
        _RNG.set_state(new_state)

    mrandom._get_cuda_rng_state = _get_cuda_rng_state
    mrandom._set_cuda_rng_state = _set_cuda_rng_state

    _MODE = CudaToCpuMode()
    _MODE.__enter__()

    # The two places that test Tensor.type() for a CUDA type name.
    from megatron.core.optimizer import clip_grads, optimizer as mopt

    def with_cuda_type_names(fn):
        def wrapper(*a, **k):
            with cuda_type_names():
                return fn(*a, **k)
        wrapper.__wrapped__ = fn
        return wrapper

    mopt.Float16OptimizerWithFloat16Params.__init__ = with_cuda_type_names(
        mopt.Float16OptimizerWithFloat16Params.__init__)
    clip_grads.clip_grad_by_total_norm_fp32 = with_cuda_type_names(
        clip_grads.clip_grad_by_total_norm_fp32)
    mopt.clip_grad_by_total_norm_fp32 = clip_grads.clip_grad_by_total_norm_fp32
    return _MODE


@contextlib.contextmanager
def cuda_type_names():
    """Inside: CPU tensors report CUDA type names from Tensor.type()."""
    assert _MODE is not None
    _MODE.cuda_type_names = True
    try:
        yield
    finally:
        _MODE.cuda_type_names = False
