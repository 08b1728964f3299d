/* The CUDA backend module: its vtable, the context (device, stream, cuBLAS handle, scratch),
 * device memory, error reporting, and the one exported symbol, ckpt_backend_entry. The
 * operations live in linear.cu, attention.cu, attention_mma.cu, elementwise.cu and
 * compare.cu. */
#include "cuda_private.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- errors ------------------------------------------------------------------------- */

static int vfail(const ckpt_backend_host *host, int code, const char *suffix, const char *fmt, va_list ap)
{
    char msg[768];
    int len = vsnprintf(msg, sizeof msg, fmt, ap);
    if (len < 0)
        len = 0;
    if (suffix && (size_t)len < sizeof msg)
        snprintf(msg + len, sizeof msg - (size_t)len, "%s", suffix);
    return host->error(code, CKPT_ERRCLASS_BACKEND, "%s", msg);
}

int ckpt_cuda_fail(const ckpt_backend_host *host, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    code = vfail(host, code, NULL, fmt, ap);
    va_end(ap);
    return code;
}

int ckpt_cuda_check(const ckpt_cuda *c, cudaError_t err, const char *fmt, ...)
{
    char suffix[320];
    va_list ap;
    int code;

    if (err == cudaSuccess)
        return 0;
    /* The runtime keeps a failed call's error as the thread's last error, where the check
     * after the next kernel launch would find it and blame that launch: the error is
     * reported here, so it is taken off there. */
    (void)cudaGetLastError();
    snprintf(suffix, sizeof suffix, ": %s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
    code = err == cudaErrorMemoryAllocation ? CKPT_ENOMEM : CKPT_ERROR;
    va_start(ap, fmt);
    code = vfail(c->host, code, suffix, fmt, ap);
    va_end(ap);
    return code;
}

int ckpt_cuda_check_blas(const ckpt_cuda *c, cublasStatus_t st, const char *fmt, ...)
{
    char suffix[320];
    va_list ap;
    int code;

    if (st == CUBLAS_STATUS_SUCCESS)
        return 0;
    snprintf(suffix, sizeof suffix, ": cuBLAS: %s", cublasGetStatusString(st));
    code = st == CUBLAS_STATUS_ALLOC_FAILED ? CKPT_ENOMEM : CKPT_ERROR;
    va_start(ap, fmt);
    code = vfail(c->host, code, suffix, fmt, ap);
    va_end(ap);
    return code;
}

int ckpt_cuda_enter(const ckpt_cuda *c, const char *op)
{
    return ckpt_cuda_check(c, cudaSetDevice(c->device), "CUDA %s: cannot select device %d", op, c->device);
}

/* ---- shared helpers -------------------------------------------------------------------- */

int ckpt_cuda_scratch(ckpt_cuda *c, size_t bytes, void **out, const char *op)
{
    const size_t grain = (size_t)2 << 20; /* grow in 2 MiB steps */
    size_t size;
    int rc;

    if (bytes <= c->scratch_size) {
        *out = c->scratch;
        return 0;
    }
    if (bytes > SIZE_MAX - grain)
        return ckpt_cuda_fail(c->host, CKPT_ENOMEM, "CUDA %s: %zu bytes of scratch memory", op, bytes);
    size = (bytes + grain - 1) / grain * grain;
    if (c->scratch) {
        /* Kernels queued before this operation may still read the old buffer. */
        if ((rc = ckpt_cuda_check(c, cudaStreamSynchronize(c->stream), "CUDA %s: waiting for the stream", op)) < 0)
            return rc;
        cudaFree(c->scratch);
        c->scratch = NULL;
        c->scratch_size = 0;
    }
    if ((rc = ckpt_cuda_check(c, cudaMalloc(&c->scratch, size), "CUDA %s: allocating %zu bytes of scratch memory",
                              op, size)) < 0) {
        c->scratch = NULL;
        return rc;
    }
    c->scratch_size = size;
    *out = c->scratch;
    return 0;
}

unsigned ckpt_cuda_blocks(const ckpt_cuda *c, int64_t n, int threads)
{
    int64_t need = (n + threads - 1) / threads;
    int64_t fill = (int64_t)c->sm_count * 16; /* 16 blocks per multiprocessor keep it busy */
    if (need > fill)
        need = fill;
    return need < 1 ? 1u : (unsigned)need;
}

/* ---- context ----------------------------------------------------------------------------- */

static void cuda_free(void *ctx)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    if (!c)
        return;
    /* Nothing can be reported from here: release what exists, ignore failures. */
    cudaSetDevice(c->device);
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    if (c->blas)
        cublasDestroy(c->blas);
    cudaFree(c->scratch);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
}

static int cuda_init(void **ctx, const ckpt_backend_host *host, int device, char *description,
                     size_t description_size)
{
    cudaDeviceProp prop;
    cudaError_t err;
    ckpt_cuda *c;
    int count = 0, rc;

    *ctx = NULL;
    if (description && description_size)
        description[0] = '\0';
    err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess)
        return ckpt_cuda_fail(host, CKPT_ENOTFOUND, "no CUDA device: %s", cudaGetErrorString(err));
    if (count <= 0)
        return ckpt_cuda_fail(host, CKPT_ENOTFOUND, "no CUDA device: the driver reports none");
    if (device < 0 || device >= count)
        return ckpt_cuda_fail(host, CKPT_ENOTFOUND, "no CUDA device %d: %d device%s present (0 to %d)", device,
                              count, count == 1 ? "" : "s", count - 1);
    err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess)
        return ckpt_cuda_fail(host, CKPT_ENOTFOUND, "CUDA device %d: cannot read its properties: %s", device,
                              cudaGetErrorString(err));
    if (prop.major < 8)
        return ckpt_cuda_fail(host, CKPT_EUNSUPPORTED,
                              "CUDA device %d (%s) has compute capability %d.%d; the CUDA backend needs 8.0 or "
                              "newer (bfloat16 tensor cores)",
                              device, prop.name, prop.major, prop.minor);

    if (!(c = (ckpt_cuda *)calloc(1, sizeof *c)))
        return ckpt_cuda_fail(host, CKPT_ENOMEM, "CUDA device %d: out of host memory for its context", device);
    c->host = host;
    c->device = device;
    c->sm_count = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    c->smem_optin = prop.sharedMemPerBlockOptin;
    if ((rc = ckpt_cuda_check(c, cudaSetDevice(device), "CUDA device %d (%s): cannot select it", device,
                              prop.name)) < 0 ||
        (rc = ckpt_cuda_check(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                              "CUDA device %d (%s): cannot create a stream", device, prop.name)) < 0 ||
        (rc = ckpt_cuda_check_blas(c, cublasCreate(&c->blas), "CUDA device %d (%s): cannot create a cuBLAS handle",
                                   device, prop.name)) < 0 ||
        (rc = ckpt_cuda_check_blas(c, cublasSetStream(c->blas, c->stream),
                                   "CUDA device %d: cannot bind cuBLAS to the stream", device)) < 0) {
        cuda_free(c);
        return rc;
    }
    if (description && description_size)
        snprintf(description, description_size, "%s, sm_%d%d, %.1f GiB", prop.name, prop.major, prop.minor,
                 (double)prop.totalGlobalMem / (double)(1u << 30));
    *ctx = c;
    return 0;
}

/* ---- memory ------------------------------------------------------------------------------- */

static int cuda_alloc(void *ctx, size_t bytes, void **out)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    int rc;

    *out = NULL;
    if ((rc = ckpt_cuda_enter(c, "alloc")) < 0)
        return rc;
    /* A 0-byte request still gets a distinct pointer, so that callers need no special case. */
    return ckpt_cuda_check(c, cudaMalloc(out, bytes ? bytes : 1), "CUDA alloc: %zu bytes", bytes);
}

static void cuda_release(void *ctx, void *p)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    if (!p)
        return;
    /* Kernels queued on the stream may still use p. Nothing can be reported from here. */
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    cudaFree(p);
}

static int cuda_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    int rc;

    if (!bytes)
        return 0;
    if ((rc = ckpt_cuda_enter(c, "upload")) < 0 ||
        (rc = ckpt_cuda_check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream),
                              "CUDA upload: %zu bytes", bytes)) < 0)
        return rc;
    /* The caller may reuse or free src when this returns; with pageable memory CUDA has
     * copied it already, with page-locked memory it would not have: wait to be sure. */
    return ckpt_cuda_check(c, cudaStreamSynchronize(c->stream), "CUDA upload: %zu bytes", bytes);
}

static int cuda_download(void *ctx, void *dst, const void *src, size_t bytes)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    int rc;

    if ((rc = ckpt_cuda_enter(c, "download")) < 0)
        return rc;
    if (bytes && (rc = ckpt_cuda_check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream),
                                       "CUDA download: %zu bytes", bytes)) < 0)
        return rc;
    /* Also reports a failure of any kernel queued before (CUDA reports those late). */
    return ckpt_cuda_check(c, cudaStreamSynchronize(c->stream),
                           "CUDA download: %zu bytes (waiting for the operations queued before it)", bytes);
}

static int cuda_memory(void *ctx, size_t *free_bytes, size_t *total_bytes)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    size_t f = 0, t = 0;
    int rc;

    if ((rc = ckpt_cuda_enter(c, "memory")) < 0 ||
        (rc = ckpt_cuda_check(c, cudaMemGetInfo(&f, &t), "CUDA memory: cudaMemGetInfo")) < 0)
        return rc;
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    return 0;
}

static int cuda_synchronize(void *ctx)
{
    ckpt_cuda *c = (ckpt_cuda *)ctx;
    int rc;

    if ((rc = ckpt_cuda_enter(c, "synchronize")) < 0)
        return rc;
    return ckpt_cuda_check(c, cudaStreamSynchronize(c->stream), "CUDA synchronize: waiting for the queued operations");
}

/* ---- the vtable ---------------------------------------------------------------------------- */

static const ckpt_backend_vtable cuda_vtable = {
    .abi_version = CKPT_BACKEND_ABI_VERSION,
    .name = "cuda",
    .init = cuda_init,
    .free = cuda_free,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .upload = cuda_upload,
    .download = cuda_download,
    .memory = cuda_memory,
    .synchronize = cuda_synchronize,
    .linear = ckpt_cuda_linear,
    .norm = ckpt_cuda_norm,
    .rope = ckpt_cuda_rope,
    .attention = ckpt_cuda_attention,
    .act = ckpt_cuda_act,
    .add = ckpt_cuda_add,
    .compare = ckpt_cuda_compare,
};

extern "C" __attribute__((visibility("default"))) const ckpt_backend_vtable *ckpt_backend_entry(void);

extern "C" const ckpt_backend_vtable *ckpt_backend_entry(void)
{
    return &cuda_vtable;
}
