/* ckpt_convert: what the output holds, safety policy, atomicity, determinism. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static ckpt_ckpt *open_path(const char *path)
{
    ckpt_ckpt *c = NULL;
    if (ckpt_open(&c, path, NULL) < 0)
        return NULL;
    return c;
}

static int same_file(const char *a, const char *b)
{
    size_t la, lb;
    unsigned char *x = ckpt_test_read_file(a, &la), *y = ckpt_test_read_file(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* Compare every tensor's values (as float64) between two checkpoints, by name. */
static int same_values(const ckpt_ckpt *a, const ckpt_ckpt *b)
{
    size_t i;
    for (i = 0; i < ckpt_tensor_count(a); i++) {
        const ckpt_tensor *x = ckpt_tensor_at(a, i), *y = ckpt_tensor_find(b, x->name);
        int64_t n = ckpt_tensor_numel(x);
        double *u, *v;
        int same;
        if (!y || ckpt_tensor_numel(y) != n)
            return 0;
        if (!ckpt_dtype_can_convert(CKPT_DTYPE_F64, x->dtype))
            continue;
        u = calloc((size_t)n + 1, sizeof *u);
        v = calloc((size_t)n + 1, sizeof *v);
        same = u && v && ckpt_tensor_read(x, 0, n, CKPT_DTYPE_F64, u) == 0 &&
               ckpt_tensor_read(y, 0, n, CKPT_DTYPE_F64, v) == 0 && memcmp(u, v, (size_t)n * sizeof *u) == 0;
        free(u);
        free(v);
        if (!same)
            return 0;
    }
    return 1;
}

CKPT_TEST(test_convert_torch_keeps_views_and_metadata)
{
    ckpt_ckpt *in = open_path(ckpt_test_data("torch/views.pt")), *out;
    const ckpt_tensor *base, *slice;

    ASSERT_TRUE(in != NULL);
    ASSERT_OK(ckpt_convert(in, "views.pt", NULL, NULL));
    out = open_path("views.pt");
    ASSERT_TRUE(out != NULL);
    ASSERT_EQ_INT(ckpt_tensor_count(out), ckpt_tensor_count(in));
    base = ckpt_tensor_find(out, "base");
    slice = ckpt_tensor_find(out, "slice");
    ASSERT_TRUE(base && slice);
    ASSERT_TRUE(base->storage == slice->storage); /* still one shared storage */
    ASSERT_EQ_INT(slice->offset, ckpt_tensor_find(in, "slice")->offset);
    ASSERT_TRUE(same_values(in, out));
    ckpt_close(out);
    ckpt_close(in);
}

CKPT_TEST(test_convert_casts_floating_tensors_only)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_ckpt *in = open_path(ckpt_test_data("torch/dtypes.pt")), *out;
    size_t i;

    ASSERT_TRUE(in != NULL);
    o.dtype = CKPT_DTYPE_BF16;
    ASSERT_OK(ckpt_convert(in, "bf16.pt", &o, NULL));
    out = open_path("bf16.pt");
    ASSERT_TRUE(out != NULL);
    for (i = 0; i < ckpt_tensor_count(in); i++) {
        const ckpt_tensor *x = ckpt_tensor_at(in, i), *y = ckpt_tensor_find(out, x->name);
        ASSERT_TRUE(y != NULL);
        ASSERT_EQ_INT(y->dtype, ckpt_dtype_is_float(x->dtype) ? CKPT_DTYPE_BF16 : x->dtype);
    }
    ckpt_close(out);
    o.dtype = CKPT_DTYPE_I32;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_convert(in, "int.safetensors", &o, NULL));
    ASSERT_TRUE(access("int.safetensors", F_OK) != 0);
    ckpt_close(in);
}

CKPT_TEST(test_convert_refuses_unknown_globals_unless_told)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_ckpt *in = open_path(ckpt_test_data("torch/unsafe_os_system.pt")), *out;
    size_t i;

    ASSERT_TRUE(in != NULL);
    ASSERT_FAILS(CKPT_EUNSAFE, ckpt_convert(in, "out.pt", &o, NULL));
    ASSERT_ERROR_MENTIONS("posix.system");
    ASSERT_TRUE(access("out.pt", F_OK) != 0);

    o.unknown = CKPT_UNKNOWN_DROP;
    ASSERT_OK(ckpt_convert(in, "dropped.pt", &o, NULL));
    out = open_path("dropped.pt");
    ASSERT_TRUE(out != NULL);
    for (i = 0; i < ckpt_global_count(out); i++)
        ASSERT_TRUE(ckpt_global_at(out, i)->known);
    ASSERT_EQ_INT(ckpt_tensor_count(out), ckpt_tensor_count(in));
    ckpt_close(out);

    o.unknown = CKPT_UNKNOWN_KEEP;
    ASSERT_OK(ckpt_convert(in, "kept.pt", &o, NULL));
    out = open_path("kept.pt");
    ASSERT_TRUE(out != NULL);
    for (i = 0; i < ckpt_global_count(out); i++)
        if (!ckpt_global_at(out, i)->known)
            break;
    ASSERT_TRUE(i < ckpt_global_count(out));
    ckpt_close(out);
    ckpt_close(in);
}

CKPT_TEST(test_convert_never_replaces_without_overwrite)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_ckpt *in = open_path(ckpt_test_data("torch/basic.pt"));
    size_t len;
    unsigned char *data;

    ASSERT_TRUE(in != NULL);
    ckpt_test_write_file("out.safetensors", "precious", 8);
    ASSERT_FAILS(CKPT_EEXISTS, ckpt_convert(in, "out.safetensors", &o, NULL));
    data = ckpt_test_read_file("out.safetensors", &len);
    ASSERT_TRUE(data && len == 8 && memcmp(data, "precious", 8) == 0);
    free(data);
    o.overwrite = 1;
    ASSERT_OK(ckpt_convert(in, "out.safetensors", &o, NULL));
    ckpt_close(in);
}

CKPT_TEST(test_convert_output_does_not_depend_on_threads_or_memory)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    /* same file name in each directory: torch archives embed it */
    static const char *outputs[] = { "t1/out.pt", "t2/out.pt", "t3/out.pt" };
    ckpt_ckpt *in = open_path(ckpt_test_data("torch/megatron.pt"));

    ASSERT_TRUE(in != NULL);
    ASSERT_TRUE(mkdir("t1", 0755) == 0 && mkdir("t2", 0755) == 0 && mkdir("t3", 0755) == 0);
    o.dtype = CKPT_DTYPE_F32;
    o.threads = 1;
    ASSERT_OK(ckpt_convert(in, outputs[0], &o, NULL));
    o.threads = 4;
    ASSERT_OK(ckpt_convert(in, outputs[1], &o, NULL));
    o.threads = 2;
    o.memory = 1; /* below the minimum chunk: clamps, still works */
    ASSERT_OK(ckpt_convert(in, outputs[2], &o, NULL));
    ASSERT_TRUE(same_file(outputs[0], outputs[1]));
    ASSERT_TRUE(same_file(outputs[0], outputs[2]));
    ckpt_close(in);
}

typedef struct progress_log {
    uint64_t last, total;
    int calls;
} progress_log;

static void record_progress(uint64_t done, uint64_t total, void *payload)
{
    progress_log *p = payload;
    p->last = done;
    p->total = total;
    p->calls++;
}

CKPT_TEST(test_convert_reports_progress_and_notes)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_convert_report r;
    progress_log log = { 0, 0, 0 };
    ckpt_ckpt *in = open_path(ckpt_test_data("sample/tiny_llama.pt"));
    struct stat st;

    ASSERT_TRUE(in != NULL);
    o.progress = record_progress;
    o.progress_payload = &log;
    ASSERT_OK(ckpt_convert(in, "tiny.safetensors", &o, &r));
    ASSERT_TRUE(log.calls > 0);
    ASSERT_EQ_INT(log.last, log.total);
    ASSERT_EQ_INT(r.tensors, ckpt_tensor_count(in));
    ASSERT_TRUE(stat("tiny.safetensors", &st) == 0);
    ASSERT_EQ_INT(r.bytes_written, st.st_size);
    ASSERT_EQ_INT(r.dropped_values, 4); /* args, checkpoint_version, iteration, num_floating_point_operations_so_far */
    ASSERT_TRUE(r.notes.data && strstr((const char *)r.notes.data, "dropped non-tensor entries: args"));
    ckpt_convert_report_dispose(&r);
    ckpt_close(in);
}

CKPT_TEST(test_convert_round_trips_between_formats)
{
    static const char *chain[] = { "a.pdparams", "b.safetensors", "c.pt", "d.pdparams" };
    ckpt_ckpt *first = open_path(ckpt_test_data("paddle/bf16.pdparams")), *prev = first;
    size_t i;

    ASSERT_TRUE(first != NULL);
    for (i = 0; i < sizeof chain / sizeof chain[0]; i++) {
        ckpt_ckpt *next;
        ASSERT_OK(ckpt_convert(prev, chain[i], NULL, NULL));
        next = open_path(chain[i]);
        ASSERT_TRUE(next != NULL);
        ASSERT_TRUE(same_values(first, next));
        if (prev != first)
            ckpt_close(prev);
        prev = next;
    }
    ckpt_close(prev);
    ckpt_close(first);
}
