/* The known set of pickle globals.
 *
 * "Known" means that a GLOBAL naming it is expected in real checkpoints and that
 * ckptconv either interprets it (tensor rebuild functions, storages, dtypes,
 * OrderedDict, set/frozenset/bytearray, _codecs.encode, numpy array reconstruction, the
 * metadata classes of PyTorch Distributed Checkpoint) or
 * reads past it as data (the save and load plans of Distributed Checkpoint's planner,
 * which megatron-core stores in `.metadata` as `all_local_plans`, megatron-core 0.13's
 * MCoreSavePlan among them) or
 * carries it through verbatim as an opaque, round-trippable object (argparse.Namespace,
 * enums and config classes of Megatron, DeepSpeed and Transformer Engine). Nothing is
 * ever imported or called, known or not. The set exists so that a checkpoint can be
 * reported as containing code references outside it: anything else (posix.system,
 * os.system, nt.system, subprocess.*, builtins.eval/exec/compile/open/__import__,
 * unknown classes) gets CKPT_VALUE_UNSAFE.
 *
 * builtins.getattr and the copyreg constructors are listed because enum members and
 * protocol-0/1 objects are pickled through them, but they are only as harmless as their
 * first argument: the reader keeps them known only when that argument is itself a known
 * class (see pickle_reduce.c).
 *
 * The table is sorted by (module, name) in byte order for bsearch. */
#include "pickle_private.h"

#include <stdlib.h>
#include <string.h>

typedef struct known_global {
    const char *module;
    const char *name;
} known_global;

static const known_global known[] = {
    { "_codecs", "encode" },
    { "_io", "BytesIO" },
    { "argparse", "Namespace" },
    { "builtins", "bool" },
    { "builtins", "bytearray" },
    { "builtins", "bytes" },
    { "builtins", "complex" },
    { "builtins", "dict" },
    { "builtins", "float" },
    { "builtins", "frozenset" },
    { "builtins", "getattr" },
    { "builtins", "int" },
    { "builtins", "list" },
    { "builtins", "object" },
    { "builtins", "range" },
    { "builtins", "set" },
    { "builtins", "slice" },
    { "builtins", "str" },
    { "builtins", "tuple" },
    { "collections", "Counter" },
    { "collections", "OrderedDict" },
    { "collections", "defaultdict" },
    { "collections", "deque" },
    { "copyreg", "__newobj__" },
    { "copyreg", "__newobj_ex__" },
    { "copyreg", "_reconstructor" },
    { "deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler" },
    { "deepspeed.runtime.fp16.loss_scaler", "LossScaler" },
    { "deepspeed.runtime.zero.config", "ZeroStageEnum" },
    { "deepspeed.utils.tensor_fragment", "fragment_address" },
    { "io", "BytesIO" },
    { "megatron.core.dist_checkpointing.strategies.torch", "MCoreSavePlan" },
    { "megatron.core.enums", "ModelType" },
    { "megatron.core.extensions.transformer_engine", "TEDelayedScaling" },
    { "megatron.core.model_parallel_config", "ModelParallelConfig" },
    { "megatron.core.optimizer", "OptimizerConfig" },
    { "megatron.core.optimizer.optimizer_config", "OptimizerConfig" },
    { "megatron.core.rerun_state_machine", "RerunDiagnostic" },
    { "megatron.core.rerun_state_machine", "RerunMode" },
    { "megatron.core.rerun_state_machine", "RerunState" },
    { "megatron.core.transformer.enums", "AttnBackend" },
    { "megatron.core.transformer.enums", "AttnMaskType" },
    { "megatron.core.transformer.enums", "AttnType" },
    { "megatron.core.transformer.enums", "CudaGraphModule" },
    { "megatron.core.transformer.enums", "CudaGraphScope" },
    { "megatron.core.transformer.enums", "InferenceCudaGraphScope" },
    { "megatron.core.transformer.enums", "LayerType" },
    { "megatron.core.transformer.enums", "ModelType" },
    { "megatron.core.transformer.transformer_config", "TransformerConfig" },
    { "numpy", "dtype" },
    { "numpy", "ndarray" },
    { "numpy._core.multiarray", "_reconstruct" },
    { "numpy._core.multiarray", "scalar" },
    { "numpy._core.numeric", "_frombuffer" },
    { "numpy.core.multiarray", "_reconstruct" },
    { "numpy.core.multiarray", "scalar" },
    { "numpy.core.numeric", "_frombuffer" },
    { "numpy.dtypes", "BoolDType" },
    { "numpy.dtypes", "ByteDType" },
    { "numpy.dtypes", "BytesDType" },
    { "numpy.dtypes", "CLongDoubleDType" },
    { "numpy.dtypes", "Complex128DType" },
    { "numpy.dtypes", "Complex64DType" },
    { "numpy.dtypes", "DateTime64DType" },
    { "numpy.dtypes", "Float16DType" },
    { "numpy.dtypes", "Float32DType" },
    { "numpy.dtypes", "Float64DType" },
    { "numpy.dtypes", "HalfDType" },
    { "numpy.dtypes", "Int16DType" },
    { "numpy.dtypes", "Int32DType" },
    { "numpy.dtypes", "Int64DType" },
    { "numpy.dtypes", "Int8DType" },
    { "numpy.dtypes", "IntDType" },
    { "numpy.dtypes", "LongDType" },
    { "numpy.dtypes", "LongDoubleDType" },
    { "numpy.dtypes", "LongLongDType" },
    { "numpy.dtypes", "ObjectDType" },
    { "numpy.dtypes", "ShortDType" },
    { "numpy.dtypes", "StrDType" },
    { "numpy.dtypes", "StringDType" },
    { "numpy.dtypes", "TimeDelta64DType" },
    { "numpy.dtypes", "UByteDType" },
    { "numpy.dtypes", "UInt16DType" },
    { "numpy.dtypes", "UInt32DType" },
    { "numpy.dtypes", "UInt64DType" },
    { "numpy.dtypes", "UInt8DType" },
    { "numpy.dtypes", "UIntDType" },
    { "numpy.dtypes", "ULongDType" },
    { "numpy.dtypes", "ULongLongDType" },
    { "numpy.dtypes", "UShortDType" },
    { "numpy.dtypes", "VoidDType" },
    { "numpy.random", "__RandomState_ctor" },
    { "numpy.random._generator", "Generator" },
    { "numpy.random._mt19937", "MT19937" },
    { "numpy.random._pcg64", "PCG64" },
    { "numpy.random._pcg64", "PCG64DXSM" },
    { "numpy.random._philox", "Philox" },
    { "numpy.random._pickle", "__bit_generator_ctor" },
    { "numpy.random._pickle", "__generator_ctor" },
    { "numpy.random._pickle", "__randomstate_ctor" },
    { "numpy.random._sfc64", "SFC64" },
    { "numpy.random.mtrand", "RandomState" },
    { "pathlib", "Path" },
    { "pathlib", "PosixPath" },
    { "pathlib", "PurePath" },
    { "pathlib", "PurePosixPath" },
    { "pathlib", "PureWindowsPath" },
    { "pathlib", "WindowsPath" },
    { "signal", "Signals" },
    { "torch", "BFloat16Storage" },
    { "torch", "BFloat16Tensor" },
    { "torch", "BoolStorage" },
    { "torch", "BoolTensor" },
    { "torch", "ByteStorage" },
    { "torch", "ByteTensor" },
    { "torch", "CharStorage" },
    { "torch", "CharTensor" },
    { "torch", "ComplexDoubleStorage" },
    { "torch", "ComplexDoubleTensor" },
    { "torch", "ComplexFloatStorage" },
    { "torch", "ComplexFloatTensor" },
    { "torch", "DoubleStorage" },
    { "torch", "DoubleTensor" },
    { "torch", "FloatStorage" },
    { "torch", "FloatTensor" },
    { "torch", "HalfStorage" },
    { "torch", "HalfTensor" },
    { "torch", "IntStorage" },
    { "torch", "IntTensor" },
    { "torch", "LongStorage" },
    { "torch", "LongTensor" },
    { "torch", "QInt32Storage" },
    { "torch", "QInt8Storage" },
    { "torch", "QUInt2x4Storage" },
    { "torch", "QUInt4x2Storage" },
    { "torch", "QUInt8Storage" },
    { "torch", "ShortStorage" },
    { "torch", "ShortTensor" },
    { "torch", "Size" },
    { "torch", "Tensor" },
    { "torch", "_mkldnn" },
    { "torch", "bfloat16" },
    { "torch", "bits16" },
    { "torch", "bits1x8" },
    { "torch", "bits2x4" },
    { "torch", "bits4x2" },
    { "torch", "bits8" },
    { "torch", "bool" },
    { "torch", "cdouble" },
    { "torch", "cfloat" },
    { "torch", "chalf" },
    { "torch", "channels_last" },
    { "torch", "channels_last_3d" },
    { "torch", "complex128" },
    { "torch", "complex32" },
    { "torch", "complex64" },
    { "torch", "contiguous_format" },
    { "torch", "device" },
    { "torch", "double" },
    { "torch", "float" },
    { "torch", "float16" },
    { "torch", "float32" },
    { "torch", "float4_e2m1fn_x2" },
    { "torch", "float64" },
    { "torch", "float8_e4m3fn" },
    { "torch", "float8_e4m3fnuz" },
    { "torch", "float8_e5m2" },
    { "torch", "float8_e5m2fnuz" },
    { "torch", "float8_e8m0fnu" },
    { "torch", "half" },
    { "torch", "int" },
    { "torch", "int1" },
    { "torch", "int16" },
    { "torch", "int2" },
    { "torch", "int3" },
    { "torch", "int32" },
    { "torch", "int4" },
    { "torch", "int5" },
    { "torch", "int6" },
    { "torch", "int64" },
    { "torch", "int7" },
    { "torch", "int8" },
    { "torch", "jagged" },
    { "torch", "long" },
    { "torch", "per_channel_affine" },
    { "torch", "per_channel_affine_float_qparams" },
    { "torch", "per_channel_symmetric" },
    { "torch", "per_tensor_affine" },
    { "torch", "per_tensor_symmetric" },
    { "torch", "preserve_format" },
    { "torch", "qint32" },
    { "torch", "qint8" },
    { "torch", "quint2x4" },
    { "torch", "quint4x2" },
    { "torch", "quint8" },
    { "torch", "short" },
    { "torch", "sparse_bsc" },
    { "torch", "sparse_bsr" },
    { "torch", "sparse_coo" },
    { "torch", "sparse_csc" },
    { "torch", "sparse_csr" },
    { "torch", "strided" },
    { "torch", "uint1" },
    { "torch", "uint16" },
    { "torch", "uint2" },
    { "torch", "uint3" },
    { "torch", "uint32" },
    { "torch", "uint4" },
    { "torch", "uint5" },
    { "torch", "uint6" },
    { "torch", "uint64" },
    { "torch", "uint7" },
    { "torch", "uint8" },
    { "torch._C", "Generator" },
    { "torch._tensor", "_rebuild_from_type_v2" },
    { "torch._utils", "_rebuild_device_tensor_from_cpu_tensor" },
    { "torch._utils", "_rebuild_device_tensor_from_numpy" },
    { "torch._utils", "_rebuild_meta_tensor_no_storage" },
    { "torch._utils", "_rebuild_nested_tensor" },
    { "torch._utils", "_rebuild_parameter" },
    { "torch._utils", "_rebuild_parameter_with_state" },
    { "torch._utils", "_rebuild_qtensor" },
    { "torch._utils", "_rebuild_sparse_tensor" },
    { "torch._utils", "_rebuild_tensor" },
    { "torch._utils", "_rebuild_tensor_v2" },
    { "torch._utils", "_rebuild_tensor_v3" },
    { "torch._utils", "_rebuild_wrapper_subclass" },
    { "torch.cuda", "BFloat16Storage" },
    { "torch.cuda", "BFloat16Tensor" },
    { "torch.cuda", "BoolStorage" },
    { "torch.cuda", "BoolTensor" },
    { "torch.cuda", "ByteStorage" },
    { "torch.cuda", "ByteTensor" },
    { "torch.cuda", "CharStorage" },
    { "torch.cuda", "CharTensor" },
    { "torch.cuda", "ComplexDoubleStorage" },
    { "torch.cuda", "ComplexDoubleTensor" },
    { "torch.cuda", "ComplexFloatStorage" },
    { "torch.cuda", "ComplexFloatTensor" },
    { "torch.cuda", "DoubleStorage" },
    { "torch.cuda", "DoubleTensor" },
    { "torch.cuda", "FloatStorage" },
    { "torch.cuda", "FloatTensor" },
    { "torch.cuda", "HalfStorage" },
    { "torch.cuda", "HalfTensor" },
    { "torch.cuda", "IntStorage" },
    { "torch.cuda", "IntTensor" },
    { "torch.cuda", "LongStorage" },
    { "torch.cuda", "LongTensor" },
    { "torch.cuda", "QInt32Storage" },
    { "torch.cuda", "QInt8Storage" },
    { "torch.cuda", "QUInt2x4Storage" },
    { "torch.cuda", "QUInt4x2Storage" },
    { "torch.cuda", "QUInt8Storage" },
    { "torch.cuda", "ShortStorage" },
    { "torch.cuda", "ShortTensor" },
    { "torch.distributed.checkpoint.filesystem", "_StorageInfo" },
    { "torch.distributed.checkpoint.filesystem", "_StoragePrefix" },
    { "torch.distributed.checkpoint.metadata", "BytesStorageMetadata" },
    { "torch.distributed.checkpoint.metadata", "ChunkStorageMetadata" },
    { "torch.distributed.checkpoint.metadata", "Metadata" },
    { "torch.distributed.checkpoint.metadata", "MetadataIndex" },
    { "torch.distributed.checkpoint.metadata", "StorageMeta" },
    { "torch.distributed.checkpoint.metadata", "TensorProperties" },
    { "torch.distributed.checkpoint.metadata", "TensorStorageMetadata" },
    { "torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING" },
    { "torch.distributed.checkpoint.planner", "BytesIOWriteData" },
    { "torch.distributed.checkpoint.planner", "LoadItemType" },
    { "torch.distributed.checkpoint.planner", "LoadPlan" },
    { "torch.distributed.checkpoint.planner", "ReadItem" },
    { "torch.distributed.checkpoint.planner", "SavePlan" },
    { "torch.distributed.checkpoint.planner", "TensorWriteData" },
    { "torch.distributed.checkpoint.planner", "WriteItem" },
    { "torch.distributed.checkpoint.planner", "WriteItemType" },
    { "torch.nn.parameter", "Parameter" },
    { "torch.serialization", "_get_layout" },
    { "torch.storage", "TypedStorage" },
    { "torch.storage", "UntypedStorage" },
    { "torch.storage", "_load_from_bytes" },
    { "transformer_engine.common.recipe", "DelayedScaling" },
    { "transformer_engine.common.recipe", "Float8BlockScaling" },
    { "transformer_engine.common.recipe", "Float8CurrentScaling" },
    { "transformer_engine.common.recipe", "Format" },
    { "transformer_engine.common.recipe", "MMParams" },
    { "transformer_engine.common.recipe", "MXFP8BlockScaling" },
    { "transformer_engine.common.recipe", "NVFP4BlockScaling" },
    { "transformer_engine.common.recipe", "QParams" },
    { "transformer_engine.common.recipe", "_FormatHelper" },
    { "types", "SimpleNamespace" },
};

static int compare(const void *key, const void *entry)
{
    const known_global *k = key, *e = entry;
    int c = strcmp(k->module, e->module);
    return c ? c : strcmp(k->name, e->name);
}

int ckpt_pickle_global_known(const char *module, const char *name)
{
    known_global k;

    if (!module || !name)
        return 0;
    k.module = module;
    k.name = name;
    ckpt_pickle__py3_name(&k.module, &k.name);
    return bsearch(&k, known, sizeof known / sizeof known[0], sizeof known[0], compare) != NULL;
}

/* Python's _compat_pickle renames, restricted to the names in the known set. */
static const struct {
    const char *py2_module, *py2_name, *py3_module, *py3_name;
} renames[] = {
    { "__builtin__", "xrange", "builtins", "range" },
    { "__builtin__", "unicode", "builtins", "str" },
    { "__builtin__", "long", "builtins", "int" },
};

void ckpt_pickle__py3_name(const char **module, const char **name)
{
    size_t i;

    for (i = 0; i < sizeof renames / sizeof renames[0]; i++) {
        if (strcmp(*module, renames[i].py2_module) == 0 && strcmp(*name, renames[i].py2_name) == 0) {
            *module = renames[i].py3_module;
            *name = renames[i].py3_name;
            return;
        }
    }
    if (strcmp(*module, "__builtin__") == 0)
        *module = "builtins";
    else if (strcmp(*module, "copy_reg") == 0)
        *module = "copyreg";
}

void ckpt_pickle__py2_name(const char **module, const char **name)
{
    size_t i;

    for (i = 0; i < sizeof renames / sizeof renames[0]; i++) {
        if (strcmp(*module, renames[i].py3_module) == 0 && strcmp(*name, renames[i].py3_name) == 0) {
            *module = renames[i].py2_module;
            *name = renames[i].py2_name;
            return;
        }
        /* "builtins.unicode" has no py2 spelling: "__builtin__.unicode" reads back as
         * builtins.str, so it keeps its py3 module. */
        if (strcmp(*module, renames[i].py3_module) == 0 && strcmp(*name, renames[i].py2_name) == 0)
            return;
    }
    if (strcmp(*module, "builtins") == 0)
        *module = "__builtin__";
    else if (strcmp(*module, "copyreg") == 0)
        *module = "copy_reg";
}
