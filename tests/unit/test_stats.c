/* Tensor statistics against numpy (testdata/vectors/stats_cases.bin.gz, written by
 * testdata/gen/gen_dtype_vectors.py, which documents how each case's data is made; the
 * data is rebuilt here from the same xorshift32 stream). Mean and std there are exact. */
#include "core_fixture.h"

#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct numpy_stats {
    uint32_t id, dtype;
    uint64_t n;
    double min, max, mean, std;
    uint64_t count, nan, inf;
} numpy_stats;

/* One tensor over one storage over one mapped file. */
typedef struct fixture {
    mapped m;
    ckpt_extent e;
    ckpt_storage s;
    ckpt_tensor t;
} fixture;

static uint32_t xorshift32(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The bytes of case `id` in its dtype (see stats_data in the generator). */
static void *case_data(uint32_t id, uint64_t n, ckpt_dtype *dtype)
{
    float *f = malloc(n * sizeof *f);
    void *out = NULL;
    uint32_t x = 0x9E3779B9u + id;
    uint64_t i;

    *dtype = CKPT_DTYPE_INVALID;
    if (!f)
        return NULL;
    for (i = 0; i < n; i++)
        f[i] = f32_of(0x3F800000u | (xorshift32(&x) >> 9)) - 1.5f;
    x = 0x9E3779B9u + id;
    switch (id) {
    case 0:
        for (i = 0; i < n; i++) {
            if (i % 1000 == 17)
                f[i] = NAN;
            if (i % 7919 == 5)
                f[i] = INFINITY;
            if (i % 104729 == 3)
                f[i] = -INFINITY;
        }
        *dtype = CKPT_DTYPE_F32;
        return f;
    case 1:
    case 2:
        for (i = 0; i < n; i++) {
            f[i] *= id == 1 ? 1000.0f : 200000.0f;
            if (id == 1 && i % 5000 == 1)
                f[i] = NAN;
        }
        *dtype = id == 1 ? CKPT_DTYPE_BF16 : CKPT_DTYPE_F16;
        out = malloc(n * 2);
        if (out && ckpt_dtype_convert(*dtype, out, CKPT_DTYPE_F32, f, n) != 0) {
            free(out);
            out = NULL;
        }
        break;
    case 3:
        if ((out = malloc(n * sizeof(double))))
            for (i = 0; i < n; i++)
                ((double *)out)[i] = (double)f[i] * 1e-3 + 1e8;
        *dtype = CKPT_DTYPE_F64;
        break;
    case 4:
        if ((out = malloc(n * 4)))
            for (i = 0; i < n; i++) {
                uint32_t u = xorshift32(&x);
                memcpy((uint8_t *)out + 4 * i, &u, 4);
            }
        *dtype = CKPT_DTYPE_I32;
        break;
    default:
        for (i = 0; i < n; i++)
            f[i] = NAN;
        *dtype = CKPT_DTYPE_F32;
        return f;
    }
    free(f);
    return out;
}

static int fixture_map(fixture *fx, const char *path, const void *data, size_t len, ckpt_dtype dtype, int64_t numel)
{
    memset(fx, 0, sizeof *fx);
    if (map_file(&fx->m, path, data, len) != 0)
        return -1;
    extent_set(&fx->e, &fx->m, 0, len, len, CKPT_EXTENT_RAW);
    fx->s.key = path;
    fx->s.dtype = dtype;
    fx->s.nbytes = len;
    fx->s.n_extents = 1;
    fx->s.extents = &fx->e;
    tensor_init(&fx->t, path, dtype, &fx->s, 1, &numel);
    return 0;
}

/* The same bytes as a raw deflate stream: a storage that cannot be mapped. */
static int fixture_deflate(fixture *fx, const char *path, const void *data, size_t len, ckpt_dtype dtype,
                           int64_t numel)
{
    size_t zlen;
    unsigned char *z = deflate_raw(data, len, &zlen);
    int rc = z ? fixture_map(fx, path, z, zlen, dtype, numel) : -1;

    free(z);
    if (rc == 0) {
        fx->e.encoding = CKPT_EXTENT_DEFLATE;
        fx->e.size = len;
        fx->s.nbytes = len;
    }
    return rc;
}

static void fixture_unmap(fixture *fx)
{
    unmap_file(&fx->m);
}

/* Within `rel` of `scale`; NaN only matches NaN. */
static int close_enough(double got, double want, double rel, double scale)
{
    if (isnan(want))
        return isnan(got);
    return fabs(got - want) <= rel * scale;
}

/* A mean is as precise as the spread of the values allows, not relative to itself. */
static int mean_close(double got, double want, double std)
{
    return close_enough(got, want, 1e-12, fabs(want) + std);
}

static int check_stats(const char *what, const ckpt_tensor_stats *got, const numpy_stats *want)
{
    int ok = got->count == want->count && got->nan == want->nan && got->inf == want->inf &&
             close_enough(got->min, want->min, 0, 0) && close_enough(got->max, want->max, 0, 0) &&
             mean_close(got->mean, want->mean, want->std) && close_enough(got->std, want->std, 1e-12, want->std);
    if (!ok)
        fprintf(stderr,
                "  %s: min %.17g max %.17g mean %.17g std %.17g count %" PRIu64 " nan %" PRIu64 " inf %" PRIu64
                "\n  numpy: min %.17g max %.17g mean %.17g std %.17g count %" PRIu64 " nan %" PRIu64 " inf %" PRIu64 "\n",
                what, got->min, got->max, got->mean, got->std, got->count, got->nan, got->inf, want->min, want->max,
                want->mean, want->std, want->count, want->nan, want->inf);
    return ok;
}

static int load_cases(numpy_stats *cases, int max)
{
    gzFile g = gzopen(ckpt_test_data("vectors/stats_cases.bin.gz"), "rb");
    uint32_t n = 0;
    int i;

    if (!g)
        return -1;
    if (gzread(g, &n, 4) != 4 || n > (uint32_t)max)
        n = 0;
    for (i = 0; i < (int)n; i++) {
        unsigned char rec[8 + 8 + 32 + 24];
        if (gzread(g, rec, sizeof rec) != (int)sizeof rec)
            break;
        memcpy(&cases[i].id, rec, 4);
        memcpy(&cases[i].dtype, rec + 4, 4);
        memcpy(&cases[i].n, rec + 8, 8);
        memcpy(&cases[i].min, rec + 16, 8);
        memcpy(&cases[i].max, rec + 24, 8);
        memcpy(&cases[i].mean, rec + 32, 8);
        memcpy(&cases[i].std, rec + 40, 8);
        memcpy(&cases[i].count, rec + 48, 8);
        memcpy(&cases[i].nan, rec + 56, 8);
        memcpy(&cases[i].inf, rec + 64, 8);
    }
    gzclose(g);
    return i == (int)n ? (int)n : -1;
}

CKPT_TEST(test_stats_reference_values)
{
    numpy_stats cases[16];
    int n = load_cases(cases, 16), i;

    ASSERT_TRUE(n >= 6);
    for (i = 0; i < n; i++) {
        ckpt_dtype dtype;
        void *data = case_data(cases[i].id, cases[i].n, &dtype);
        ckpt_tensor_stats st, zst;
        fixture fx, zx;
        size_t len = cases[i].n * ckpt_dtype_size(dtype);

        ASSERT_TRUE(data != NULL);
        ASSERT_EQ_INT(dtype, cases[i].dtype);
        ASSERT_OK(fixture_map(&fx, "case.bin", data, len, dtype, (int64_t)cases[i].n));
        ASSERT_OK(ckpt_tensor_stats_compute(&fx.t, &st));
        ASSERT_TRUE(check_stats("mapped", &st, &cases[i]));
        /* decoded from a deflate stream: the same chunks, so the same bits */
        ASSERT_OK(fixture_deflate(&zx, "case.z", data, len, dtype, (int64_t)cases[i].n));
        ASSERT_OK(ckpt_tensor_stats_compute(&zx.t, &zst));
        ASSERT_TRUE(memcmp(&st, &zst, sizeof st) == 0);
        fixture_unmap(&fx);
        fixture_unmap(&zx);
        free(data);
    }
}

/* The result does not depend on the number of threads, mapped or decoded. */
CKPT_TEST(test_stats_thread_count_independent)
{
    ckpt_dtype dtype;
    uint64_t n = 1000003;
    void *data = case_data(0, n, &dtype);
    ckpt_tensor_stats a, b, c;
    fixture fx, zx;

    ASSERT_TRUE(data != NULL);
    ASSERT_OK(fixture_map(&fx, "t.bin", data, n * 4, dtype, (int64_t)n));
    ASSERT_OK(fixture_deflate(&zx, "t.z", data, n * 4, dtype, (int64_t)n));
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    ASSERT_OK(ckpt_tensor_stats_compute(&fx.t, &a));
#ifdef _OPENMP
    omp_set_num_threads(5);
#endif
    ASSERT_OK(ckpt_tensor_stats_compute(&fx.t, &b));
    ASSERT_OK(ckpt_tensor_stats_compute(&zx.t, &c));
    ASSERT_TRUE(memcmp(&a, &b, sizeof a) == 0);
    ASSERT_TRUE(memcmp(&a, &c, sizeof a) == 0);
    ASSERT_TRUE(a.count == n && a.nan > 0 && a.inf > 0);
    fixture_unmap(&fx);
    fixture_unmap(&zx);
    free(data);
}

/* A transposed view has the same values in another order. */
CKPT_TEST(test_stats_strided_view)
{
    ckpt_dtype dtype;
    uint64_t n = 300000;
    void *data = case_data(0, n, &dtype);
    ckpt_tensor_stats flat, tr;
    fixture fx;

    ASSERT_TRUE(data != NULL);
    ASSERT_OK(fixture_map(&fx, "s.bin", data, n * 4, dtype, (int64_t)n));
    ASSERT_OK(ckpt_tensor_stats_compute(&fx.t, &flat));
    fx.t.ndim = 2;
    fx.t.shape[0] = 600;
    fx.t.shape[1] = 500;
    fx.t.stride[0] = 1;
    fx.t.stride[1] = 600;
    ASSERT_OK(ckpt_tensor_stats_compute(&fx.t, &tr));
    ASSERT_TRUE(tr.min == flat.min && tr.max == flat.max);
    ASSERT_TRUE(tr.count == flat.count && tr.nan == flat.nan && tr.inf == flat.inf);
    ASSERT_TRUE(mean_close(tr.mean, flat.mean, flat.std) && close_enough(tr.std, flat.std, 1e-12, flat.std));
    fixture_unmap(&fx);
    free(data);
}

CKPT_TEST(test_stats_edge_cases)
{
    int32_t one = -7;
    uint64_t c[2] = { 0, 0 };
    ckpt_tensor_stats st;
    fixture fx;

    ASSERT_OK(fixture_map(&fx, "one.bin", &one, 4, CKPT_DTYPE_I32, 1));
    fx.t.ndim = 0;
    ASSERT_OK(ckpt_tensor_stats_compute(&fx.t, &st));
    ASSERT_TRUE(st.min == -7 && st.max == -7 && st.mean == -7 && st.std == 0 && st.count == 1);
    /* no elements */
    fx.t.ndim = 1;
    fx.t.shape[0] = 0;
    ASSERT_OK(ckpt_tensor_stats_compute(&fx.t, &st));
    ASSERT_TRUE(st.count == 0 && isnan(st.min) && isnan(st.mean) && isnan(st.std));
    fixture_unmap(&fx);
    /* complex values have no order */
    ASSERT_OK(fixture_map(&fx, "c.bin", c, 16, CKPT_DTYPE_C64, 2));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_tensor_stats_compute(&fx.t, &st));
    ASSERT_ERROR_MENTIONS("c.bin");
    /* invalid views are refused */
    fx.t.dtype = CKPT_DTYPE_F32;
    fx.t.shape[0] = 5;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_stats_compute(&fx.t, &st));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_tensor_stats_compute(&fx.t, NULL));
    fixture_unmap(&fx);
}

/* A storage that fails to decode names itself, whichever thread hit it. */
CKPT_TEST(test_stats_errors_propagate)
{
    ckpt_dtype dtype;
    uint64_t n = 200000;
    void *data = case_data(0, n, &dtype);
    ckpt_tensor_stats st;
    fixture zx;

    ASSERT_TRUE(data != NULL);
    ASSERT_OK(fixture_deflate(&zx, "bad.z", data, n * 4, dtype, (int64_t)n));
    zx.e.stored_size /= 2;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_tensor_stats_compute(&zx.t, &st));
    ASSERT_ERROR_MENTIONS("bad.z");
    ASSERT_ERROR_MENTIONS("truncated");
    fixture_unmap(&zx);
    free(data);
}
