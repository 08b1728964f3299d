"""Transformer Engine layers' `_extra_state` in a torch_dist checkpoint, ckptconv's against
megatron-core 0.16.1's own save. No Transformer Engine is needed: a TE linear's
sharded_state_dict (extensions/transformer_engine.py, via make_sharded_tensors_for_checkpoint)
makes its `_extra_state` a ShardedObject with make_sharded_object_for_checkpoint
(transformer/utils.py): the stacked layers' sharded_offsets ((0, layer, layers),) give the
object the offset (layer,) and shape (layers,), and its default replica_id (0, tp, dp) makes TP
rank 0 its saver; the value is what TE >= 2.0's get_extra_state returns, a uint8 tensor (empty
without FP8 state). Those objects are built here from the values in hf2mcore's legacy TE file
(one of them made non-empty: FP8-like metadata as TE encodes it, pickled into a uint8 tensor)
and saved with dist_checkpointing.save (gloo, world size 1; at TP 2 under torchrun both ranks
make the same objects, replica_id (0, tp, 0), and rank 0 saves them). Then, for
`ckptconv reshard --to torch_dist` of the same legacy model:
- the `_extra_state` item keys of both .metadata files, and the objects their bytes unpickle to
  (dtype, shape, content), must be equal; whether the bytes are equal is printed (they are not:
  torch 2.9's torch.save adds a random .data/serialization_id record, which ckptconv's
  archives, like older torch's, have not, and pickles the tensor in a longer data.pkl);
- dist_checkpointing.load of ckptconv's output with a sharded_state_dict made as a TE GPTModel
  makes it (a ShardedTensor per tensor item at its global shape, a ShardedObject per extra
  state) must give back every tensor of the source, StrictHandling RAISE_ALL;
- the same load of `--extra-state drop` output must fail: the default strict handling,
  ASSUME_OK_UNEXPECTED (dist_checkpointing/validation.py), leaves a key the checkpoint lacks to
  the storage layer, which raises.
By hand, not a ctest (it needs megatron-core):

    PYTHONPATH=/path/to/Megatron-LM:testdata/gen VENV/bin/python \\
        testdata/gen/check_mcore_dist_extra_state.py build/ckptconv > testdata/gen/check_mcore_dist_extra_state.log
"""

import io
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
LAYER_PREFIX = "decoder.layers."
FP8_KEY = "decoder.layers.1.self_attention.linear_qkv._extra_state"


def fp8_state():
    """A TE-like FP8 state, encoded as TE >= 2.0's _encode_extra_state encodes it."""
    import torch

    state = {"scale_fwd": torch.ones(3), "amax_history_fwd": torch.arange(6.0).view(2, 3),
             "extra_fp8_variables": {"num_gemms": 1}}
    buf = io.BytesIO()
    torch.save(state, buf)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def stacked(name):
    """(key, layer) of a legacy decoder-layer name, as megatron-core stacks layers."""
    rest = name[len(LAYER_PREFIX):]
    layer, key = rest.split(".", 1)
    return LAYER_PREFIX + key, int(layer)


def extra_objects(model, layers):
    from megatron.core.transformer.utils import make_sharded_object_for_checkpoint

    objs = {}
    for name, value in model.items():
        if not name.endswith("._extra_state") or not name.startswith(LAYER_PREFIX):
            continue
        key, layer = stacked(name)
        objs[name] = make_sharded_object_for_checkpoint(value, key, ((0, layer, layers),))
    return objs


def distcp_items(d):
    """{key: bytes} of every bytes item of a torch_dist directory."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata

    reader = FileSystemReader(d)
    md = reader.read_metadata()
    out = {}
    for idx, info in md.storage_data.items():
        if not isinstance(md.state_dict_metadata[idx.fqn], BytesStorageMetadata):
            continue
        with open(os.path.join(d, info.relative_path), "rb") as f:
            f.seek(info.offset)
            out[idx.fqn] = f.read(info.length)
    return out


def template(d, model, rank):
    """A TE GPTModel's sharded_state_dict, by hand: every tensor item of the checkpoint (whole on
    each rank, rank its replica id), and the extra state objects of the legacy model."""
    import torch
    from megatron.core.dist_checkpointing import ShardedTensor
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    md = FileSystemReader(d).read_metadata()
    sd = {}
    for k, m in md.state_dict_metadata.items():
        if isinstance(m, TensorStorageMetadata):
            sd[k] = ShardedTensor.from_rank_offsets(k, torch.empty(tuple(m.size), dtype=m.properties.dtype),
                                                    replica_id=rank)
    layers = max(stacked(n)[1] for n in model if n.startswith(LAYER_PREFIX)) + 1
    for name, obj in extra_objects(model, layers).items():
        sd[name] = obj
    return sd


def worker(work, tp):
    import gen_megatron_cpu as shim

    shim.install()
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    from megatron.core import dist_checkpointing, parallel_state
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    from megatron.core.dist_checkpointing.validation import StrictHandling

    # the writer processes log their memory use through psutil, which this venv lacks (without
    # it they raise and the save waits for them forever); the files do not depend on it
    filesystem_async._process_memory = lambda: 0

    parallel_state.initialize_model_parallel(tp, 1)
    rank = dist.get_rank()
    legacy = os.path.join(work, "legacy")
    model = torch.load(os.path.join(legacy, "iter_0000001", "mp_rank_00", "model_optim_rng.pt"),
                       map_location="cpu", weights_only=False)["model"]
    layers = max(stacked(n)[1] for n in model if n.startswith(LAYER_PREFIX)) + 1
    ours = os.path.join(work, "ours", "iter_0000001")
    theirs = os.path.join(work, "theirs")
    if rank == 0:
        os.makedirs(theirs)
    dist.barrier()
    dist_checkpointing.save(extra_objects(model, layers), theirs)
    dist.barrier()
    if rank == 0:
        a, b = distcp_items(theirs), distcp_items(ours)
        b = {k: v for k, v in b.items() if "._extra_state/" in k}
        print(f"TP {tp}: megatron-core's extra state items {len(a)}, ckptconv's {len(b)}, "
              f"keys equal: {sorted(a) == sorted(b)}")
        same_obj = same_bytes = 0
        for k in sorted(a):
            x = torch.load(io.BytesIO(a[k]), weights_only=False)
            y = torch.load(io.BytesIO(b[k]), weights_only=False)
            same_obj += (len(x) == len(y) == 1 and x[0].dtype == y[0].dtype and x[0].shape == y[0].shape and
                         torch.equal(x[0], y[0]))
            same_bytes += a[k] == b[k]
        nonempty = [k for k in sorted(a) if torch.load(io.BytesIO(a[k]), weights_only=False)[0].numel()]
        print(f"TP {tp}: objects equal (uint8 tensors, same shape and content): {same_obj} of {len(a)}; "
              f"bytes equal: {same_bytes} of {len(a)}; non-empty: {nonempty}")
    got = dist_checkpointing.load(template(ours, model, rank), ours, strict=StrictHandling.RAISE_ALL)
    if rank == 0:
        bad = [n for n, v in model.items() if n.endswith("._extra_state") and n.startswith(LAYER_PREFIX)
               and not torch.equal(got[n], v)]
        tensors = sum(1 for k in got if not k.endswith("._extra_state"))
        emb = "embedding.word_embeddings.weight"
        print(f"TP {tp}: dist_checkpointing.load of ckptconv's torch_dist (RAISE_ALL): {tensors} tensor items, "
              f"extra states differing from the legacy file's: {bad}; {emb} equal: "
              f"{torch.equal(got[emb], model[emb])}")
    dropped = os.path.join(work, "dropped", "iter_0000001")
    try:
        dist_checkpointing.load(template(dropped, model, rank), dropped)
        print(f"TP {tp}: load of --extra-state drop output: loaded (unexpected)") if rank == 0 else None
    except BaseException as e:  # torch.distributed.checkpoint.CheckpointException is one
        if rank == 0:
            print(f"TP {tp}: load of --extra-state drop output fails: {type(e).__name__}")
    dist.barrier()
    dist.destroy_process_group()


def prepare(ckptconv, work, tp):
    import torch

    legacy = os.path.join(work, "legacy")
    run = lambda *a: subprocess.run([ckptconv, *a], check=True, stdout=subprocess.DEVNULL)
    run("hf2mcore", os.path.join(TESTDATA, "hf", "llama_tiny"), legacy, "-q")
    path = os.path.join(legacy, "iter_0000001", "mp_rank_00", "model_optim_rng.pt")
    ck = torch.load(path, map_location="cpu", weights_only=False)
    ck["model"][FP8_KEY] = fp8_state()
    torch.save(ck, path)
    run("reshard", legacy, os.path.join(work, "ours"), "--to", "torch_dist", "--tp", str(tp), "-q")
    run("reshard", legacy, os.path.join(work, "dropped"), "--to", "torch_dist", "--tp", str(tp),
        "--extra-state", "drop", "-q")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        tp = int(os.environ["WORLD_SIZE"])
        worker(sys.argv[2], tp)
        return
    ckptconv = os.path.abspath(sys.argv[1])
    for tp in (1, 2):
        work = tempfile.mkdtemp()
        try:
            prepare(ckptconv, work, tp)
            subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(tp),
                            "--master_addr", "127.0.0.1", "--master_port", str(29530 + tp),
                            os.path.abspath(__file__), "--worker", work], check=True)
        finally:
            shutil.rmtree(work)


if __name__ == "__main__":
    main()
