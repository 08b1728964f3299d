/* Shared by the format round-trip harnesses: the input opened, a scratch directory for
 * what the writer produces, files compared byte for byte and tensors compared by name.
 *
 * Outputs go to a directory made on first use under $TMPDIR (else /tmp) and removed at
 * exit; tests/fuzz/long.sh points TMPDIR at memory-backed storage, since the writer
 * syncs every file it commits. Everything here aborts through FUZZ_ASSERT. */
#ifndef CKPT_FUZZ_ROUND_TRIP_H
#define CKPT_FUZZ_ROUND_TRIP_H

#include "fuzz.h"
#include "../unit/value_dump.h"

#include <ckpt.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Largest tensor compared element by element (inputs are small; casts widen up to 8x). */
#define RT_MAX_TENSOR_BYTES ((uint64_t)64 << 20)

static char rt_scratch[4096];

static void rt_remove_scratch(void)
{
    static const char *const names[] = { "a", "b", "c" };
    char path[4200];
    size_t i;

    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", rt_scratch, names[i]);
        unlink(path);
    }
    rmdir(rt_scratch);
}

/* Path of output `name` ("a", "b" or "c") in the scratch directory. */
static const char *rt_path(char *buf, size_t cap, const char *name)
{
    if (!rt_scratch[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(rt_scratch, sizeof rt_scratch, "%s/ckpt_round_trip_XXXXXX", tmp && *tmp ? tmp : "/tmp");
        FUZZ_ASSERT(mkdtemp(rt_scratch) != NULL);
        atexit(rt_remove_scratch);
    }
    snprintf(buf, cap, "%s/%s", rt_scratch, name);
    return buf;
}

/* The input opened as `format`: 1 with *in and *fd (close both), or 0 when the reader
 * refused it as malformed input must be refused (a message, and EFORMAT, EUNSUPPORTED,
 * ENOMEM or `also`). */
static int rt_open_input(const uint8_t *data, size_t size, const char *format, int also, int *fd, ckpt_ckpt **in)
{
    ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
    char src[64];
    int rc;

    *in = NULL;
    *fd = fuzz_memfd(data, size, src, sizeof src);
    oo.format = format;
    rc = ckpt_open(in, src, &oo);
    if (rc == 0)
        return 1;
    FUZZ_ASSERT(*in == NULL && ckpt_error_last()->message[0] != '\0');
    FUZZ_ASSERT(rc == CKPT_EFORMAT || rc == CKPT_EUNSUPPORTED || rc == CKPT_ENOMEM || rc == also);
    close(*fd);
    return 0;
}

/* The three output paths a round trip writes. */
static void rt_paths(char *a, char *b, char *c, size_t cap)
{
    rt_path(a, cap, "a");
    rt_path(b, cap, "b");
    rt_path(c, cap, "c");
}

static uint8_t *rt_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data;
    long size;

    FUZZ_ASSERT(f != NULL);
    FUZZ_ASSERT(fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0);
    data = malloc(size ? (size_t)size : 1);
    FUZZ_ASSERT(data && fread(data, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return data;
}

static void rt_same_file(const char *a, const char *b)
{
    size_t na, nb;
    uint8_t *da = rt_slurp(a, &na), *db = rt_slurp(b, &nb);

    FUZZ_ASSERT(na == nb && memcmp(da, db, na) == 0);
    free(da);
    free(db);
}

/* ckpt_convert into path; the report is released either way. */
static int rt_write(const ckpt_ckpt *c, const char *path, const ckpt_convert_options *o)
{
    ckpt_convert_report report;
    int rc = ckpt_convert(c, path, o, &report);

    ckpt_convert_report_dispose(&report);
    return rc;
}

static ckpt_ckpt *rt_open(const char *path, const char *format)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;
    int rc;

    o.format = format;
    rc = ckpt_open(&c, path, &o);
    if (rc < 0)
        fprintf(stderr, "reading back what was written: %s\n", ckpt_error_last()->message);
    FUZZ_ASSERT(rc == 0);
    return c;
}

/* The elements of t in C order as `as` (converted as ckpt_dtype_convert converts). */
static uint8_t *rt_values(const ckpt_tensor *t, ckpt_dtype as, size_t *len)
{
    int64_t n = ckpt_tensor_numel(t);
    size_t own = ckpt_dtype_size(t->dtype), out = ckpt_dtype_size(as);
    uint8_t *raw, *conv;

    FUZZ_ASSERT(n >= 0 && own && out);
    FUZZ_ASSERT((uint64_t)n <= RT_MAX_TENSOR_BYTES / 16);
    raw = malloc(n ? (size_t)n * own : 1);
    conv = malloc(n ? (size_t)n * out : 1);
    FUZZ_ASSERT(raw && conv);
    FUZZ_ASSERT(ckpt_tensor_read(t, 0, n, t->dtype, raw) == 0);
    FUZZ_ASSERT(ckpt_dtype_convert(as, conv, t->dtype, raw, (size_t)n) == 0);
    free(raw);
    *len = (size_t)n * out;
    return conv;
}

/* What a convert with opts->dtype = cast makes of a tensor of type t. */
static ckpt_dtype rt_cast(ckpt_dtype t, ckpt_dtype cast)
{
    return cast != CKPT_DTYPE_INVALID && ckpt_dtype_is_float(t) ? cast : t;
}

/* `out` holds exactly the tensors of `in` (names unique in both), each with the same shape
 * and its values cast as the writer was asked to. */
static void rt_same_tensors(const ckpt_ckpt *in, const ckpt_ckpt *out, ckpt_dtype cast)
{
    size_t i;

    FUZZ_ASSERT(ckpt_tensor_count(in) == ckpt_tensor_count(out));
    for (i = 0; i < ckpt_tensor_count(in); i++) {
        const ckpt_tensor *a = ckpt_tensor_at(in, i), *b = ckpt_tensor_find(out, a->name);
        uint8_t *va, *vb;
        size_t na, nb;
        int d;

        FUZZ_ASSERT(b != NULL);
        FUZZ_ASSERT(b->dtype == rt_cast(a->dtype, cast));
        FUZZ_ASSERT(a->ndim == b->ndim);
        for (d = 0; d < a->ndim; d++)
            FUZZ_ASSERT(a->shape[d] == b->shape[d]);
        va = rt_values(a, b->dtype, &na);
        vb = rt_values(b, b->dtype, &nb);
        FUZZ_ASSERT(na == nb && memcmp(va, vb, na) == 0);
        free(va);
        free(vb);
    }
}

/* Canonical text of a value (reference mode: sharing shows); "" for NULL. */
static void rt_dump(const ckpt_value *v, ckpt_buf *out)
{
    ckpt_buf_clear(out);
    if (v)
        FUZZ_ASSERT(ckpt_test_dump(v, 1, out) == 0);
    FUZZ_ASSERT(ckpt_buf_putc(out, 0) == 0);
}

static void rt_same_value(const ckpt_value *a, const ckpt_value *b)
{
    ckpt_buf da = CKPT_BUF_INIT, db = CKPT_BUF_INIT;

    rt_dump(a, &da);
    rt_dump(b, &db);
    if (da.len != db.len || memcmp(da.data, db.data, da.len) != 0)
        fprintf(stderr, "value before: %.2000s\nvalue after:  %.2000s\n", (const char *)da.data,
                (const char *)db.data);
    FUZZ_ASSERT(da.len == db.len && memcmp(da.data, db.data, da.len) == 0);
    ckpt_buf_dispose(&da);
    ckpt_buf_dispose(&db);
}

/* The first write of `in` to a returned rc; it must have succeeded, and writing again (to b)
 * must give the same bytes. */
static void rt_wrote_twice(int rc, const ckpt_ckpt *in, const char *a, const char *b, const ckpt_convert_options *o)
{
    if (rc < 0)
        fprintf(stderr, "writing: %s\n", ckpt_error_last()->message);
    FUZZ_ASSERT(rc == 0);
    FUZZ_ASSERT(rt_write(in, b, o) == 0);
    rt_same_file(a, b);
}

/* What was read back from a, written to c, is a again (the writer's output is its own fixed
 * point) and reads back to the same tensors; the result, c opened, is for the caller to
 * check further and close. */
static ckpt_ckpt *rt_fixed_point(const ckpt_ckpt *back, const char *a, const char *c, const ckpt_convert_options *o,
                                 const char *format)
{
    ckpt_ckpt *again;

    FUZZ_ASSERT(rt_write(back, c, o) == 0);
    rt_same_file(a, c);
    again = rt_open(c, format);
    rt_same_tensors(back, again, CKPT_DTYPE_INVALID);
    return again;
}

#endif
