/* The safetensors header: `u64 LE N | N bytes of UTF-8 JSON | data`, validated with every
 * rule of the reference reader (read_metadata + Metadata::validate), so that whatever we
 * accept the reference accepts, and every tensor's bytes lie inside the file, packed with
 * no hole, no overlap and no trailing byte. */
#include "safetensors_private.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    unsigned bits;
    ckpt_dtype dtype;
} st_types[CKPT_ST_DTYPE_COUNT] = {
    [CKPT_ST_BOOL] = { "BOOL", 8, CKPT_DTYPE_BOOL },
    [CKPT_ST_F4] = { "F4", 4, CKPT_DTYPE_INVALID },
    [CKPT_ST_F6_E2M3] = { "F6_E2M3", 6, CKPT_DTYPE_INVALID },
    [CKPT_ST_F6_E3M2] = { "F6_E3M2", 6, CKPT_DTYPE_INVALID },
    [CKPT_ST_U8] = { "U8", 8, CKPT_DTYPE_U8 },
    [CKPT_ST_I8] = { "I8", 8, CKPT_DTYPE_I8 },
    [CKPT_ST_F8_E5M2] = { "F8_E5M2", 8, CKPT_DTYPE_F8_E5M2 },
    [CKPT_ST_F8_E4M3] = { "F8_E4M3", 8, CKPT_DTYPE_F8_E4M3FN },
    [CKPT_ST_F8_E8M0] = { "F8_E8M0", 8, CKPT_DTYPE_INVALID },
    [CKPT_ST_F8_E4M3FNUZ] = { "F8_E4M3FNUZ", 8, CKPT_DTYPE_INVALID },
    [CKPT_ST_F8_E5M2FNUZ] = { "F8_E5M2FNUZ", 8, CKPT_DTYPE_INVALID },
    [CKPT_ST_I16] = { "I16", 16, CKPT_DTYPE_I16 },
    [CKPT_ST_U16] = { "U16", 16, CKPT_DTYPE_U16 },
    [CKPT_ST_F16] = { "F16", 16, CKPT_DTYPE_F16 },
    [CKPT_ST_BF16] = { "BF16", 16, CKPT_DTYPE_BF16 },
    [CKPT_ST_I32] = { "I32", 32, CKPT_DTYPE_I32 },
    [CKPT_ST_U32] = { "U32", 32, CKPT_DTYPE_U32 },
    [CKPT_ST_F32] = { "F32", 32, CKPT_DTYPE_F32 },
    [CKPT_ST_C64] = { "C64", 64, CKPT_DTYPE_C64 },
    [CKPT_ST_F64] = { "F64", 64, CKPT_DTYPE_F64 },
    [CKPT_ST_I64] = { "I64", 64, CKPT_DTYPE_I64 },
    [CKPT_ST_U64] = { "U64", 64, CKPT_DTYPE_U64 },
};

const char *ckpt_safetensors__dtype_string(ckpt_st_dtype t)
{
    return (unsigned)t < CKPT_ST_DTYPE_COUNT ? st_types[t].name : "invalid";
}

ckpt_dtype ckpt_safetensors__dtype_to_ckpt(ckpt_st_dtype t)
{
    return (unsigned)t < CKPT_ST_DTYPE_COUNT ? st_types[t].dtype : CKPT_DTYPE_INVALID;
}

int ckpt_safetensors__dtype_from_ckpt(ckpt_dtype t)
{
    int i;

    if (t == CKPT_DTYPE_INVALID)
        return -1;
    for (i = 0; i < CKPT_ST_DTYPE_COUNT; i++)
        if (st_types[i].dtype == t)
            return i;
    return -1;
}

static int st_dtype_lookup(const char *s)
{
    int i;

    for (i = 0; i < CKPT_ST_DTYPE_COUNT; i++)
        if (strcmp(st_types[i].name, s) == 0)
            return i;
    return -1;
}

/* "<path>: safetensors: <reason>" plus " (tensor '<name>')" when a tensor is known. */
CKPT_FORMAT_PRINTF(4, 5)
static int st_fail(int code, const char *path, const char *tensor, const char *fmt, ...)
{
    char reason[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (tensor)
        return ckpt_error_set(code, "%s: safetensors: %s (tensor '%s')", path, reason, tensor);
    return ckpt_error_set(code, "%s: safetensors: %s", path, reason);
}

static size_t child_count(const cJSON *obj)
{
    const cJSON *c;
    size_t n = 0;

    for (c = obj->child; c; c = c->next)
        n++;
    return n;
}

/* Refuse an object that names a key twice: cJSON keeps both, the reference refuses. */
static int check_unique_keys(const cJSON *obj, const char *path, const char *tensor, const char *what)
{
    const char **names;
    const cJSON *c;
    size_t n = child_count(obj), i = 0, j;
    int64_t dup = -1;
    int rc = 0;

    if (n < 2)
        return 0;
    if (n > SIZE_MAX / sizeof *names)
        return ckpt_error_oom();
    names = malloc(n * sizeof *names);
    if (!names)
        return ckpt_error_oom();
    for (c = obj->child; c; c = c->next)
        names[i++] = c->string;
    if (n <= 8) {
        for (i = 1; i < n && dup < 0; i++)
            for (j = 0; j < i && dup < 0; j++)
                if (strcmp(names[i], names[j]) == 0)
                    dup = (int64_t)i;
    } else {
        ckpt_st_names ix;
        rc = ckpt_safetensors__names_build(&ix, names, n, &dup);
        ckpt_safetensors__names_free(&ix);
    }
    if (rc == 0 && dup >= 0)
        rc = st_fail(CKPT_EFORMAT, path, tensor, "duplicate key '%s' in %s", names[dup], what);
    free(names);
    return rc;
}

/* A JSON number that must be a size or an offset (usize in the reference). */
static int get_uint(const cJSON *v, const char *path, const char *tensor, const char *field, uint64_t *out)
{
    const double limit = 9007199254740992.0; /* 2^53: every integer up to it is exact */
    double d;

    if (!cJSON_IsNumber(v))
        return st_fail(CKPT_EFORMAT, path, tensor, "%s holds a value that is not a number", field);
    d = v->valuedouble;
    if (!(d >= 0.0))
        return st_fail(CKPT_EFORMAT, path, tensor, "%s holds a negative number", field);
    if (d > limit)
        return st_fail(CKPT_EUNSUPPORTED, path, tensor, "a number in %s is above 2^53, which is not supported", field);
    if ((double)(uint64_t)d != d)
        return st_fail(CKPT_EFORMAT, path, tensor, "%s holds a number that is not an integer", field);
    *out = (uint64_t)d;
    return 0;
}

static void format_shape(char *buf, size_t cap, const cJSON *shape)
{
    const cJSON *c;
    size_t used = 0;

    used += (size_t)snprintf(buf, cap, "[");
    for (c = shape->child; c && used < cap; c = c->next)
        used += (size_t)snprintf(buf + used, cap - used, "%s%.0f", c == shape->child ? "" : ", ", c->valuedouble);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

static int read_entry(const cJSON *item, const char *path, const ckpt_st_syntax *bad, ckpt_st_entry *e)
{
    const char *name = item->string;
    const cJSON *dtype, *shape, *offsets, *c;
    uint64_t numel = 1, nbits, nbytes;
    int t, rc, ndim = 0;

    e->name = name;
    if (!cJSON_IsObject(item))
        return st_fail(CKPT_EFORMAT, path, name, "tensor entry is not a JSON object");
    if ((rc = check_unique_keys(item, path, name, "the tensor entry")) < 0)
        return rc;
    dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!dtype || !shape || !offsets)
        return st_fail(CKPT_EFORMAT, path, name, "tensor entry lacks '%s'",
                       !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!cJSON_IsString(dtype))
        return st_fail(CKPT_EFORMAT, path, name, "dtype is not a string");
    t = st_dtype_lookup(dtype->valuestring);
    if (t < 0)
        return st_fail(CKPT_EFORMAT, path, name, "unknown dtype '%s'", dtype->valuestring);
    if (!cJSON_IsArray(shape))
        return st_fail(CKPT_EFORMAT, path, name, "shape is not an array");
    if (!cJSON_IsArray(offsets) || child_count(offsets) != 2)
        return st_fail(CKPT_EFORMAT, path, name, "data_offsets is not an array of two integers");
    if (bad && bad->bad_above)
        return st_fail(CKPT_EUNSUPPORTED, path, name, "a number in %s is above 2^53, which is not supported",
                       bad->bad_field);
    if (bad)
        return st_fail(CKPT_EFORMAT, path, name, "a number in %s is not a plain non-negative integer", bad->bad_field);
    e->st_dtype = (ckpt_st_dtype)t;
    e->dtype = st_types[t].dtype;
    for (c = shape->child; c; c = c->next, ndim++) {
        uint64_t dim;
        if ((rc = get_uint(c, path, name, "shape", &dim)) < 0)
            return rc;
        if (ndim < CKPT_MAX_DIMS)
            e->shape[ndim] = (int64_t)dim;
        if (CKPT_MUL_OVERFLOWS(numel, dim, &numel))
            return st_fail(CKPT_EFORMAT, path, name, "element count of the shape overflows 64 bits");
    }
    e->ndim = ndim;
    if (CKPT_MUL_OVERFLOWS(numel, (uint64_t)st_types[t].bits, &nbits))
        return st_fail(CKPT_EFORMAT, path, name, "bit size of the shape overflows 64 bits");
    if (nbits % 8 != 0)
        return st_fail(CKPT_EFORMAT, path, name, "%llu %s elements do not fill whole bytes",
                       (unsigned long long)numel, st_types[t].name);
    nbytes = nbits / 8;
    if ((rc = get_uint(offsets->child, path, name, "data_offsets", &e->begin)) < 0 ||
        (rc = get_uint(offsets->child->next, path, name, "data_offsets", &e->end)) < 0)
        return rc;
    if (e->end < e->begin)
        return st_fail(CKPT_EFORMAT, path, name, "data_offsets end %llu is before begin %llu",
                       (unsigned long long)e->end, (unsigned long long)e->begin);
    if (e->end - e->begin != nbytes) {
        char dims[128];
        format_shape(dims, sizeof dims, shape);
        return st_fail(CKPT_EFORMAT, path, name, "data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs %llu",
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)(e->end - e->begin), st_types[t].name, dims,
                       (unsigned long long)nbytes);
    }
    return 0;
}

static int read_metadata(const cJSON *item, const char *path, ckpt_st_header *h)
{
    const cJSON *c;
    int rc;

    if (cJSON_IsNull(item))
        return 0; /* the reference reads null as "no metadata" */
    if (!cJSON_IsObject(item))
        return st_fail(CKPT_EFORMAT, path, NULL, "__metadata__ is not a JSON object");
    if ((rc = check_unique_keys(item, path, NULL, "__metadata__")) < 0)
        return rc;
    h->has_meta = 1;
    h->n_meta = child_count(item);
    if (h->n_meta == 0)
        return 0;
    h->meta = calloc(h->n_meta, sizeof *h->meta);
    if (!h->meta)
        return ckpt_error_oom();
    h->n_meta = 0;
    for (c = item->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return st_fail(CKPT_EFORMAT, path, NULL, "__metadata__ value of '%s' is not a string", c->string);
        h->meta[h->n_meta].key = c->string;
        h->meta[h->n_meta].value = c->valuestring;
        h->n_meta++;
    }
    return 0;
}

typedef struct st_span {
    uint64_t begin, end;
    size_t index;
} st_span;

static int span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorted by offsets, the tensors must tile [0, end) exactly, and end must be where the
 * file ends: no hole can hide other data, no tensor overlaps another. */
static int check_layout(ckpt_st_header *h, const char *path, uint64_t file_size)
{
    st_span *spans;
    uint64_t pos = 0, have;
    size_t i;
    int rc = 0;

    if (h->n_entries) {
        spans = malloc(h->n_entries * sizeof *spans);
        if (!spans)
            return ckpt_error_oom();
        for (i = 0; i < h->n_entries; i++) {
            spans[i].begin = h->entries[i].begin;
            spans[i].end = h->entries[i].end;
            spans[i].index = i;
        }
        qsort(spans, h->n_entries, sizeof *spans, span_cmp);
        for (i = 0; i < h->n_entries && rc == 0; i++) {
            const st_span *s = &spans[i];
            if (s->begin > pos)
                rc = st_fail(CKPT_EFORMAT, path, h->entries[s->index].name,
                             "data at [%llu, %llu) leaves a hole: the data before it ends at %llu",
                             (unsigned long long)s->begin, (unsigned long long)s->end, (unsigned long long)pos);
            else if (s->begin < pos)
                rc = st_fail(CKPT_EFORMAT, path, h->entries[s->index].name,
                             "data at [%llu, %llu) overlaps the data before it, which ends at %llu",
                             (unsigned long long)s->begin, (unsigned long long)s->end, (unsigned long long)pos);
            pos = s->end;
        }
        free(spans);
        if (rc < 0)
            return rc;
    }
    have = file_size - h->data_offset;
    if (pos < have)
        return st_fail(CKPT_EFORMAT, path, NULL, "%llu bytes after the last tensor's data (incomplete metadata)",
                       (unsigned long long)(have - pos));
    if (pos > have)
        return st_fail(CKPT_EFORMAT, path, NULL, "file truncated: the tensors need %llu bytes of data, %llu present",
                       (unsigned long long)pos, (unsigned long long)have);
    return 0;
}

/* Tensors the library cannot hold, reported only once the file is known to be valid. */
static int check_supported(const ckpt_st_header *h, const char *path)
{
    size_t i;

    for (i = 0; i < h->n_entries; i++) {
        const ckpt_st_entry *e = &h->entries[i];
        if (e->dtype == CKPT_DTYPE_INVALID)
            return st_fail(CKPT_EUNSUPPORTED, path, e->name, "dtype %s is not supported",
                           st_types[e->st_dtype].name);
        if (e->ndim > CKPT_MAX_DIMS)
            return st_fail(CKPT_EUNSUPPORTED, path, e->name, "%d dimensions, more than the %d supported", e->ndim,
                           CKPT_MAX_DIMS);
    }
    return 0;
}

static int read_tree(ckpt_st_header *h, const char *path, const ckpt_st_syntax *syn)
{
    const cJSON *c;
    size_t n, k = 0;
    int rc;

    if (!cJSON_IsObject(h->json))
        return st_fail(CKPT_EFORMAT, path, NULL, "header is not a JSON object");
    if ((rc = check_unique_keys(h->json, path, NULL, "the header")) < 0)
        return rc;
    n = child_count(h->json);
    if (n) {
        h->entries = calloc(n, sizeof *h->entries);
        if (!h->entries)
            return ckpt_error_oom();
    }
    for (c = h->json->child; c; c = c->next, k++) {
        if (strcmp(c->string, "__metadata__") == 0)
            rc = read_metadata(c, path, h);
        else
            rc = read_entry(c, path, k == syn->bad_member ? syn : NULL, &h->entries[h->n_entries++]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Everything but the data section: the length, the JSON and what it says. */
static int parse_header(ckpt_st_header *out, const char *path, const uint8_t *data, uint64_t size)
{
    ckpt_st_syntax syn;
    uint64_t n;
    int rc;

    memset(out, 0, sizeof *out);
    if (size < 8)
        return st_fail(CKPT_EFORMAT, path, NULL, "header too small: the file has %llu bytes, the length alone needs 8",
                       (unsigned long long)size);
    n = ckpt_load_u64le(data);
    if (n > CKPT_ST_MAX_HEADER)
        return st_fail(CKPT_EFORMAT, path, NULL, "header too large: %llu bytes, the limit is %u",
                       (unsigned long long)n, CKPT_ST_MAX_HEADER);
    if (n > size - 8)
        return st_fail(CKPT_EFORMAT, path, NULL, "invalid header length: %llu bytes, but only %llu follow",
                       (unsigned long long)n, (unsigned long long)(size - 8));
    out->header_len = n;
    out->data_offset = 8 + n;
    if (!ckpt_safetensors__utf8_valid(data + 8, (size_t)n))
        return st_fail(CKPT_EFORMAT, path, NULL, "header is not valid UTF-8");
    if ((rc = ckpt_safetensors__json_check(path, "header", data + 8, (size_t)n, &syn)) < 0)
        return rc;
    out->json = cJSON_ParseWithLength((const char *)data + 8, (size_t)n);
    if (!out->json)
        return ckpt_error_oom(); /* the syntax check passed, so only memory can be short */
    if ((rc = read_tree(out, path, &syn)) < 0 || (rc = check_supported(out, path)) < 0) {
        ckpt_safetensors__header_dispose(out);
        return rc;
    }
    return 0;
}

int ckpt_safetensors__parse(ckpt_st_header *out, const char *path, const uint8_t *data, uint64_t size)
{
    int rc = parse_header(out, path, data, size);

    if (rc == 0 && (rc = check_layout(out, path, size)) < 0)
        ckpt_safetensors__header_dispose(out);
    return rc;
}

int ckpt_safetensors__size(const char *path, const uint8_t *data, uint64_t size, uint64_t *need, uint64_t *file_size)
{
    ckpt_st_header h;
    uint64_t end = 0;
    size_t i;
    int rc;

    *need = 0;
    if (size < 8) {
        *need = 8;
        return 0;
    }
    if (ckpt_load_u64le(data) <= CKPT_ST_MAX_HEADER && 8 + ckpt_load_u64le(data) > size) {
        *need = 8 + ckpt_load_u64le(data);
        return 0;
    }
    if ((rc = parse_header(&h, path, data, size)) < 0)
        return rc;
    for (i = 0; i < h.n_entries; i++)
        end = h.entries[i].end > end ? h.entries[i].end : end;
    /* no overflow: offsets are at most 2^53 (get_uint), the header 10^8 bytes */
    *file_size = h.data_offset + end;
    ckpt_safetensors__header_dispose(&h);
    return 0;
}

void ckpt_safetensors__header_dispose(ckpt_st_header *h)
{
    if (!h)
        return;
    cJSON_Delete(h->json);
    free(h->entries);
    free(h->meta);
    memset(h, 0, sizeof *h);
}
