/* The checkpoint of an HDF5 file, built from the records of the child process that walked
 * it (hdf5_private.h describes them): groups, values and attributes here, datasets in
 * hdf5_build_data.c. Nothing in them is trusted: every count and length is bounded by the
 * bytes left before anything is allocated, and the stream must end where the walk says it
 * ends. */
#include "hdf5_private.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Groups nested deeper than this are refused: the engine walks value trees recursively. */
#define MAX_DEPTH 256
/* Lists nested deeper than this are no HDF5 dataspace (32 dimensions at most). */
#define MAX_VALUE_DEPTH 33

int ckpt_hdf5__malformed(const ckpt_h5_build *b, const char *what)
{
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                           "%s: corrupt HDF5 file (its metadata as the HDF5 library reported it: %s)", b->path, what);
}

/* ---- reading records ---- */

static int get_le(ckpt_h5_build *b, size_t n, uint64_t *v)
{
    size_t i;

    *v = 0;
    if ((size_t)(b->end - b->p) < n)
        return ckpt_hdf5__malformed(b, "cut short");
    for (i = 0; i < n; i++)
        *v |= (uint64_t)b->p[i] << (8 * i);
    b->p += n;
    return 0;
}

int ckpt_hdf5__get_u8(ckpt_h5_build *b, unsigned *v)
{
    uint64_t x;
    int rc = get_le(b, 1, &x);

    *v = (unsigned)x;
    return rc;
}

int ckpt_hdf5__get_u32(ckpt_h5_build *b, uint32_t *v)
{
    uint64_t x;
    int rc = get_le(b, 4, &x);

    *v = (uint32_t)x;
    return rc;
}

int ckpt_hdf5__get_u64(ckpt_h5_build *b, uint64_t *v)
{
    return get_le(b, 8, v);
}

int ckpt_hdf5__get_bytes(ckpt_h5_build *b, const unsigned char **data, size_t *n)
{
    uint32_t len;
    int rc;

    if ((rc = ckpt_hdf5__get_u32(b, &len)) < 0)
        return rc;
    if (len > (size_t)(b->end - b->p) || len >= INT_MAX)
        return ckpt_hdf5__malformed(b, "a string runs past the end");
    *data = b->p;
    *n = len;
    b->p += len;
    return 0;
}

/* A name or a message: bytes without a NUL, which would cut them short. */
static int get_text(ckpt_h5_build *b, const char **s, size_t *n)
{
    const unsigned char *data = NULL;
    int rc;

    if ((rc = ckpt_hdf5__get_bytes(b, &data, n)) < 0)
        return rc;
    if (memchr(data, 0, *n))
        return ckpt_hdf5__malformed(b, "a name holds a NUL byte");
    *s = (const char *)data;
    return 0;
}

static ckpt_value *new_key(ckpt_h5_build *b, const char *s, size_t n)
{
    return ckpt_value_new_str(b->arena, s, n);
}

static int get_value(ckpt_h5_build *b, int depth, ckpt_value **out)
{
    const unsigned char *s;
    uint64_t u;
    uint32_t n, i;
    unsigned kind;
    double d;
    size_t len;
    int rc;

    *out = NULL;
    if (depth > MAX_VALUE_DEPTH)
        return ckpt_hdf5__malformed(b, "a value nested too deeply");
    if ((rc = ckpt_hdf5__get_u8(b, &kind)) < 0)
        return rc;
    switch (kind) {
    case CKPT_H5V_LIST:
        if ((rc = ckpt_hdf5__get_u32(b, &n)) < 0)
            return rc;
        if (n > (size_t)(b->end - b->p))
            return ckpt_hdf5__malformed(b, "a list longer than what is left");
        if (!(*out = ckpt_value_new(b->arena, CKPT_VAL_LIST)))
            return ckpt_error_oom();
        for (i = 0; i < n; i++) {
            ckpt_value *item;
            if ((rc = get_value(b, depth + 1, &item)) < 0)
                return rc;
            if ((rc = ckpt_value_append(b->arena, *out, item)) < 0)
                return rc;
        }
        return 0;
    case CKPT_H5V_STR:
        if ((rc = ckpt_hdf5__get_bytes(b, &s, &len)) < 0)
            return rc;
        *out = ckpt_value_new_str(b->arena, (const char *)s, len);
        break;
    case CKPT_H5V_INT:
        if ((rc = ckpt_hdf5__get_u64(b, &u)) < 0)
            return rc;
        *out = ckpt_value_new_int(b->arena, (int64_t)u);
        break;
    case CKPT_H5V_FLOAT:
        if ((rc = ckpt_hdf5__get_u64(b, &u)) < 0)
            return rc;
        memcpy(&d, &u, sizeof d);
        *out = ckpt_value_new_float(b->arena, d);
        break;
    case CKPT_H5V_BOOL:
        if ((rc = ckpt_hdf5__get_u8(b, &kind)) < 0)
            return rc;
        *out = ckpt_value_new_bool(b->arena, kind != 0);
        break;
    default:
        return ckpt_hdf5__malformed(b, "a value of unknown kind");
    }
    return *out ? 0 : ckpt_error_oom();
}

/* ---- groups and attributes ---- */

static int open_group(ckpt_h5_build *b, const char *key, size_t n)
{
    size_t len = b->stack[b->depth - 1].prefix_len, need;
    ckpt_value *k = new_key(b, key, n), *dict = ckpt_value_new(b->arena, CKPT_VAL_DICT);
    int rc;

    if (!k || !dict)
        return ckpt_error_oom();
    if (b->depth > MAX_DEPTH)
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: groups nested more than %d deep", b->path, MAX_DEPTH);
    if ((rc = ckpt_value_dict_set(b->arena, b->stack[b->depth - 1].dict, k, dict)) < 0)
        return rc;
    if (b->depth == b->cap) {
        ckpt_h5_level *grown = realloc(b->stack, (b->cap * 2) * sizeof *grown);
        if (!grown)
            return ckpt_error_oom();
        b->stack = grown;
        b->cap *= 2;
    }
    need = len + n + 2;
    if (need > b->prefix_cap) {
        char *grown = realloc(b->prefix, need * 2);
        if (!grown)
            return ckpt_error_oom();
        b->prefix = grown;
        b->prefix_cap = need * 2;
    }
    memcpy(b->prefix + len, key, n);
    b->prefix[len + n] = '/';
    b->prefix[len + n + 1] = '\0';
    b->stack[b->depth].dict = dict;
    b->stack[b->depth].prefix_len = len + n + 1;
    b->depth++;
    return 0;
}

static int attribute(ckpt_h5_build *b)
{
    const char *where, *name;
    size_t nw, nn;
    ckpt_value *v, *dict, *k;
    char *w;
    int rc;

    if ((rc = get_text(b, &where, &nw)) < 0 || (rc = get_text(b, &name, &nn)) < 0 || (rc = get_value(b, 0, &v)) < 0)
        return rc;
    if (!b->attributes && !(b->attributes = ckpt_value_new(b->arena, CKPT_VAL_DICT)))
        return ckpt_error_oom();
    if (!(w = ckpt_arena_strndup(b->arena, where, nw)))
        return ckpt_error_oom();
    if (!(dict = ckpt_value_dict_get(b->attributes, w))) {
        if (!(k = new_key(b, where, nw)) || !(dict = ckpt_value_new(b->arena, CKPT_VAL_DICT)))
            return ckpt_error_oom();
        if ((rc = ckpt_value_dict_set(b->arena, b->attributes, k, dict)) < 0)
            return rc;
    }
    if (!(k = new_key(b, name, nn)))
        return ckpt_error_oom();
    return ckpt_value_dict_set(b->arena, dict, k, v);
}

/* ---- the stream ---- */

static int fail_record(ckpt_h5_build *b)
{
    uint32_t code, klass;
    const char *msg;
    size_t n;
    int rc;

    if ((rc = ckpt_hdf5__get_u32(b, &code)) < 0 || (rc = ckpt_hdf5__get_u32(b, &klass)) < 0 ||
        (rc = get_text(b, &msg, &n)) < 0)
        return rc;
    if (code == 0 || code > 64 || n == 0)
        return ckpt_hdf5__malformed(b, "a failure without a reason");
    return ckpt_error_setc(-(int)code, (int)klass, "%.*s", (int)n, msg);
}

/* A member of the current group under `key`: a tensor, or a dataset of strings. */
static int member(ckpt_h5_build *b, unsigned tag)
{
    ckpt_value *k, *v = NULL;
    const char *key;
    size_t n, index = 0;
    int rc;

    if ((rc = get_text(b, &key, &n)) < 0)
        return rc;
    if (tag == CKPT_H5R_VALUE) {
        rc = get_value(b, 0, &v);
    } else {
        size_t at = b->stack[b->depth - 1].prefix_len;
        char *name = ckpt_arena_alloc(b->arena, at + n + 1);
        if (!name)
            return ckpt_error_oom();
        memcpy(name, b->prefix, at);
        memcpy(name + at, key, n);
        name[at + n] = '\0';
        if ((rc = ckpt_hdf5__build_dataset(b, name, &index)) == 0 && !(v = ckpt_value_new_tensor(b->arena, index)))
            rc = ckpt_error_oom();
    }
    if (rc != 0)
        return rc;
    if (!(k = new_key(b, key, n)))
        return ckpt_error_oom();
    return ckpt_value_dict_set(b->arena, b->stack[b->depth - 1].dict, k, v);
}

static int records(ckpt_h5_build *b)
{
    const char *s;
    size_t n;
    unsigned tag;
    int rc, aborted = 0;

    for (;;) {
        if (b->p == b->end)
            return ckpt_hdf5__malformed(b, "it ends before the walk does");
        if ((rc = ckpt_hdf5__get_u8(b, &tag)) < 0)
            return rc;
        if (aborted && tag != CKPT_H5R_FAIL)
            return ckpt_hdf5__malformed(b, "a walk that stopped went on");
        switch (tag) {
        case CKPT_H5R_NOTE:
            if ((rc = get_text(b, &s, &n)) < 0)
                return rc;
            ckpt_reader_note(b->r, "%.*s", (int)n, s);
            break;
        case CKPT_H5R_GROUP:
            if ((rc = get_text(b, &s, &n)) < 0 || (rc = open_group(b, s, n)) < 0)
                return rc;
            break;
        case CKPT_H5R_END:
            if (b->depth == 1)
                return ckpt_hdf5__malformed(b, "a group closed that was not open");
            b->depth--;
            b->prefix[b->stack[b->depth - 1].prefix_len] = '\0';
            break;
        case CKPT_H5R_VALUE:
        case CKPT_H5R_DATASET:
            if ((rc = member(b, tag)) < 0)
                return rc;
            aborted = rc == 1;
            break;
        case CKPT_H5R_ATTR:
            if ((rc = attribute(b)) < 0)
                return rc;
            break;
        case CKPT_H5R_DONE:
            if (b->depth != 1 || b->p != b->end)
                return ckpt_hdf5__malformed(b, b->depth != 1 ? "a group left open" : "records after the last");
            return 0;
        case CKPT_H5R_FAIL:
            return fail_record(b);
        default:
            return ckpt_hdf5__malformed(b, "a record of unknown kind");
        }
    }
}

int ckpt_hdf5__build(ckpt_reader *r, const unsigned char *rec, size_t len)
{
    ckpt_h5_build b;
    ckpt_value *root, *k;
    int rc;

    memset(&b, 0, sizeof b);
    b.r = r;
    b.arena = ckpt_reader_arena(r);
    b.file = ckpt_reader_file(r);
    b.path = ckpt_reader_path(r);
    b.p = rec;
    b.end = rec + len;
    b.cap = 16;
    b.prefix_cap = 256;
    if (!(b.stack = malloc(b.cap * sizeof *b.stack)) || !(b.prefix = malloc(b.prefix_cap)) ||
        !(root = ckpt_value_new(b.arena, CKPT_VAL_DICT))) {
        rc = ckpt_error_oom();
        goto done;
    }
    b.prefix[0] = '\0';
    b.stack[0].dict = root;
    b.stack[0].prefix_len = 0;
    b.depth = 1;
    if ((rc = records(&b)) < 0)
        goto done;
    if (b.attributes) {
        if (!(k = new_key(&b, "__attributes__", 14))) {
            rc = ckpt_error_oom();
            goto done;
        }
        if ((rc = ckpt_value_dict_set(b.arena, root, k, b.attributes)) < 0)
            goto done;
    }
    if ((rc = ckpt_hdf5__keep_in_memory(&b)) < 0)
        goto done;
    ckpt_reader_set_root(r, root);
done:
    free(b.stack);
    free(b.prefix);
    free(b.mem);
    free(b.pending);
    return rc < 0 ? rc : 0;
}
