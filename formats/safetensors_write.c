/* Writing safetensors byte for byte as the reference writer does: tensors sorted by dtype
 * (descending, in its Dtype enum order) then by name, packed with no gaps; compact JSON
 * with __metadata__ first and serde_json's string escapes; the header padded with spaces
 * to a multiple of 8 so that every tensor is aligned to its element size. */
#include "safetensors_private.h"

#include <ckpt/buf.h>
#include <stdlib.h>
#include <string.h>

typedef struct st_item {
    const ckpt_out_tensor *t;
    size_t index;
    ckpt_st_dtype st_dtype;
    uint64_t nbytes;
} st_item;

static int item_cmp(const void *a, const void *b)
{
    const st_item *x = a, *y = b;

    if (x->st_dtype != y->st_dtype)
        return x->st_dtype > y->st_dtype ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

/* A JSON string as serde_json writes it: short escapes where JSON has them, \u00XX with
 * lowercase hex for the other control characters, everything else (UTF-8 included) raw. */
static int put_json_string(ckpt_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    int rc = ckpt_buf_putc(b, '"');

    for (; rc == 0 && *s; s++) {
        uint8_t c = (uint8_t)*s;
        switch (c) {
        case '"': rc = ckpt_buf_puts(b, "\\\""); break;
        case '\\': rc = ckpt_buf_puts(b, "\\\\"); break;
        case '\b': rc = ckpt_buf_puts(b, "\\b"); break;
        case '\f': rc = ckpt_buf_puts(b, "\\f"); break;
        case '\n': rc = ckpt_buf_puts(b, "\\n"); break;
        case '\r': rc = ckpt_buf_puts(b, "\\r"); break;
        case '\t': rc = ckpt_buf_puts(b, "\\t"); break;
        default:
            if (c < 0x20) {
                char esc[7] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0 };
                rc = ckpt_buf_puts(b, esc);
            } else {
                rc = ckpt_buf_putc(b, c);
            }
        }
    }
    return rc == 0 ? ckpt_buf_putc(b, '"') : rc;
}

/* Check what the engine hands over and compute each tensor's byte size. */
static int check_tensors(const ckpt_out *out, const char *path, st_item *items)
{
    size_t i;
    int d;

    if (out->n_blobs != out->n_tensors)
        return ckpt_error_set(CKPT_EINVALID, "%s: safetensors: %zu blobs for %zu tensors", path, out->n_blobs,
                              out->n_tensors);
    for (i = 0; i < out->n_tensors; i++) {
        const ckpt_out_tensor *t = &out->tensors[i];
        int st = ckpt_safetensors__dtype_from_ckpt(t->dtype);
        uint64_t n = ckpt_dtype_size(t->dtype);

        if (st < 0)
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: safetensors: no safetensors type for %s (tensor '%s')", path,
                                  ckpt_dtype_name(t->dtype), t->name);
        if (!ckpt_safetensors__utf8_valid((const uint8_t *)t->name, strlen(t->name)))
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: safetensors: tensor name is not valid UTF-8 (tensor '%s')",
                                  path, t->name);
        if (t->blob != i || t->offset != 0 || out->blobs[i].dtype != t->dtype || t->ndim < 0 ||
            t->ndim > CKPT_MAX_DIMS)
            return ckpt_error_set(CKPT_EINVALID, "%s: safetensors: tensor %zu is not one whole blob (tensor '%s')",
                                  path, i, t->name);
        for (d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0 || CKPT_MUL_OVERFLOWS(n, (uint64_t)t->shape[d], &n))
                return ckpt_error_set(CKPT_EINVALID, "%s: safetensors: invalid shape (tensor '%s')", path, t->name);
        if (n != out->blobs[i].nbytes)
            return ckpt_error_set(CKPT_EINVALID, "%s: safetensors: blob of %llu bytes for %llu bytes of data (tensor '%s')",
                                  path, (unsigned long long)out->blobs[i].nbytes, (unsigned long long)n, t->name);
        items[i].t = t;
        items[i].index = i;
        items[i].st_dtype = (ckpt_st_dtype)st;
        items[i].nbytes = n;
    }
    return 0;
}

static int check_unique_names(const ckpt_out *out, const char *path)
{
    const char **names;
    ckpt_st_names ix;
    int64_t dup;
    size_t i;
    int rc;

    names = malloc((out->n_tensors ? out->n_tensors : 1) * sizeof *names);
    if (!names)
        return ckpt_error_oom();
    for (i = 0; i < out->n_tensors; i++)
        names[i] = out->tensors[i].name;
    rc = ckpt_safetensors__names_build(&ix, names, out->n_tensors, &dup);
    if (rc == 0 && dup >= 0)
        rc = ckpt_error_set(CKPT_EINVALID, "%s: safetensors: two tensors have the same name (tensor '%s')", path,
                            names[dup]);
    ckpt_safetensors__names_free(&ix);
    free(names);
    return rc;
}

static int build_header(ckpt_buf *b, const st_item *items, size_t n, uint64_t *data_len)
{
    uint64_t offset = 0;
    size_t i;
    int d, rc;

    rc = ckpt_buf_puts(b, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (i = 0; rc == 0 && i < n; i++) {
        const ckpt_out_tensor *t = items[i].t;
        rc = ckpt_buf_putc(b, ',');
        if (rc == 0)
            rc = put_json_string(b, t->name);
        if (rc == 0)
            rc = ckpt_buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[",
                                 ckpt_safetensors__dtype_string(items[i].st_dtype));
        for (d = 0; rc == 0 && d < t->ndim; d++)
            rc = ckpt_buf_printf(b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        if (rc == 0)
            rc = ckpt_buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                                 (unsigned long long)(offset + items[i].nbytes));
        offset += items[i].nbytes;
    }
    if (rc == 0)
        rc = ckpt_buf_putc(b, '}');
    while (rc == 0 && b->len % 8 != 0)
        rc = ckpt_buf_putc(b, ' ');
    *data_len = offset;
    return rc;
}

int ckpt_safetensors__write_begin(ckpt_writer *w)
{
    const ckpt_out *out = ckpt_writer_out(w);
    const char *path = ckpt_writer_path(w);
    ckpt_outfile *file = ckpt_writer_file(w);
    ckpt_buf header = CKPT_BUF_INIT;
    uint8_t prefix[8];
    uint64_t data_len, offset = 0, total;
    st_item *items;
    size_t i;
    int k, rc;

    items = calloc(out->n_tensors ? out->n_tensors : 1, sizeof *items);
    if (!items)
        return ckpt_error_oom();
    rc = check_tensors(out, path, items);
    if (rc == 0)
        rc = check_unique_names(out, path);
    if (rc < 0)
        goto done;
    qsort(items, out->n_tensors, sizeof *items, item_cmp);
    if ((rc = build_header(&header, items, out->n_tensors, &data_len)) < 0)
        goto done;
    if (header.len > CKPT_ST_MAX_HEADER) {
        rc = ckpt_error_set(CKPT_EUNSUPPORTED, "%s: safetensors: header of %zu bytes, above the format's limit of %u",
                            path, header.len, CKPT_ST_MAX_HEADER);
        goto done;
    }
    for (k = 0; k < 8; k++)
        prefix[k] = (uint8_t)((uint64_t)header.len >> (8 * k));
    total = 8 + header.len + data_len;
    if ((rc = ckpt_outfile_truncate(file, total)) < 0 || (rc = ckpt_outfile_pwrite(file, 0, prefix, 8)) < 0 ||
        (rc = ckpt_outfile_pwrite(file, 8, header.data, header.len)) < 0)
        goto done;
    for (i = 0; i < out->n_tensors; i++) {
        if (items[i].nbytes) {
            rc = ckpt_writer_place(w, items[i].index, 0, items[i].nbytes, 8 + header.len + offset, CKPT_EXTENT_RAW);
            if (rc < 0)
                goto done;
        }
        offset += items[i].nbytes;
    }
    rc = 0;
done:
    ckpt_buf_dispose(&header);
    free(items);
    return rc;
}
