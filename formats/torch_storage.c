/* The storages of a torch.save pickle: persistent ids ('storage', storage class, key,
 * location, numel[, view]) resolved to one ckpt_storage per key, deduplicated through a
 * hash of the keys, with the dtype the storage class (or a v3 dtype argument) names. */
#include "torch_private.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    ckpt_dtype dtype; /* CKPT_DTYPE_INVALID: quantized, refused */
} storage_classes[] = {
    { "DoubleStorage", CKPT_DTYPE_F64 },        { "FloatStorage", CKPT_DTYPE_F32 },
    { "HalfStorage", CKPT_DTYPE_F16 },          { "BFloat16Storage", CKPT_DTYPE_BF16 },
    { "LongStorage", CKPT_DTYPE_I64 },          { "IntStorage", CKPT_DTYPE_I32 },
    { "ShortStorage", CKPT_DTYPE_I16 },         { "CharStorage", CKPT_DTYPE_I8 },
    { "ByteStorage", CKPT_DTYPE_U8 },           { "BoolStorage", CKPT_DTYPE_BOOL },
    { "ComplexFloatStorage", CKPT_DTYPE_C64 },  { "ComplexDoubleStorage", CKPT_DTYPE_C128 },
    { "QInt8Storage", CKPT_DTYPE_INVALID },     { "QInt32Storage", CKPT_DTYPE_INVALID },
    { "QUInt8Storage", CKPT_DTYPE_INVALID },    { "QUInt4x2Storage", CKPT_DTYPE_INVALID },
    { "QUInt2x4Storage", CKPT_DTYPE_INVALID },
};

const char *ckpt_torch__storage_class(ckpt_dtype t)
{
    size_t i;
    for (i = 0; i < sizeof storage_classes / sizeof storage_classes[0]; i++)
        if (storage_classes[i].dtype == t && t != CKPT_DTYPE_INVALID)
            return storage_classes[i].name;
    return NULL;
}

int ckpt_torch__fail(const ckpt_torch_interp *in, int code, const char *path, const char *fmt, ...)
{
    char what[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ckpt_error_set(code, "%s: %s (%s)", in->file, what, ckpt_torch__shown(path));
}

/* Text of a str, or of ASCII bytes (py2-era pickles store pid fields as byte strings). */
static int value_text(const ckpt_value *v, const char **s, size_t *len)
{
    size_t i;

    if (!v)
        return 0;
    if (v->kind == CKPT_VAL_STR) {
        *s = v->u.str.ptr;
        *len = v->u.str.len;
        return 1;
    }
    if (v->kind != CKPT_VAL_BYTES)
        return 0;
    for (i = 0; i < v->u.bytes.len; i++)
        if (v->u.bytes.ptr[i] >= 0x80)
            return 0;
    *s = (const char *)v->u.bytes.ptr;
    *len = v->u.bytes.len;
    return 1;
}

static int text_is(const ckpt_value *v, const char *want)
{
    const char *s;
    size_t len;
    return value_text(v, &s, &len) && len == strlen(want) && memcmp(s, want, len) == 0;
}

static const ckpt_value *tuple_item(const ckpt_value *tuple, size_t i)
{
    return tuple && tuple->kind == CKPT_VAL_TUPLE && i < tuple->u.seq.n ? tuple->u.seq.items[i] : NULL;
}

/* ---- storage table ------------------------------------------------------ */

ckpt_torch_storage_ref *ckpt_torch__find_ref(const ckpt_torch_interp *in, const char *key)
{
    uint64_t i;

    return ckpt_strmap_get(&in->by_key, key, strlen(key), &i) ? &in->refs[i] : NULL;
}

static int add_ref(ckpt_torch_interp *in, const ckpt_torch_storage_ref *ref)
{
    int rc;

    if (in->n_refs == in->cap_refs) {
        size_t cap = in->cap_refs ? in->cap_refs * 2 : 16;
        ckpt_torch_storage_ref *refs = realloc(in->refs, cap * sizeof *refs);
        if (!refs)
            return ckpt_error_oom();
        in->refs = refs;
        in->cap_refs = cap;
    }
    if ((rc = ckpt_strmap_add(&in->by_key, ref->key, strlen(ref->key), in->n_refs, NULL)) < 0)
        return rc;
    in->refs[in->n_refs++] = *ref;
    return 0;
}

void ckpt_torch__interp_init(ckpt_torch_interp *in, ckpt_reader *r, const char *key_prefix, int legacy)
{
    memset(in, 0, sizeof *in);
    in->reader = r;
    in->file = ckpt_reader_path(r);
    in->key_prefix = key_prefix;
    in->legacy = legacy;
}

void ckpt_torch__interp_dispose(ckpt_torch_interp *in)
{
    free(in->tensors);
    free(in->refs);
    ckpt_strmap_dispose(&in->by_key);
    memset(in, 0, sizeof *in);
}

/* ---- one persistent id ---------------------------------------------------- */

/* dtype of a storage class GLOBAL; *untyped for UntypedStorage. */
static int storage_class_dtype(const ckpt_torch_interp *in, const ckpt_value *g, const char *path,
                               ckpt_dtype *out, int *untyped)
{
    const char *m, *n;
    size_t i;

    *untyped = 0;
    if (!g || g->kind != CKPT_VAL_GLOBAL)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "storage type in a persistent id is not a class");
    m = g->u.global.module;
    n = g->u.global.name;
    if (strcmp(m, "torch") == 0 || strncmp(m, "torch.", 6) == 0) {
        if (strcmp(n, "UntypedStorage") == 0) {
            *untyped = 1;
            *out = CKPT_DTYPE_U8;
            return 0;
        }
        for (i = 0; i < sizeof storage_classes / sizeof storage_classes[0]; i++) {
            if (strcmp(storage_classes[i].name, n) != 0)
                continue;
            if (storage_classes[i].dtype == CKPT_DTYPE_INVALID)
                return ckpt_torch__fail(in, CKPT_EUNSUPPORTED, path, "quantized storage %s.%s not supported", m, n);
            *out = storage_classes[i].dtype;
            return 0;
        }
    }
    return ckpt_torch__fail(in, CKPT_EFORMAT, path, "unknown storage type %s.%s", m, n);
}

static int new_ref(ckpt_torch_interp *in, const char *key, ckpt_dtype dtype, uint64_t numel, int untyped,
                   const char *path, ckpt_torch_storage_ref **out)
{
    ckpt_arena *arena = ckpt_reader_arena(in->reader);
    size_t item = ckpt_dtype_size(dtype), klen = strlen(key), plen = strlen(in->key_prefix);
    ckpt_torch_storage_ref ref;
    uint64_t nbytes;
    char *name;
    int rc;

    if (untyped) {
        nbytes = numel;
        if (nbytes % item != 0)
            return ckpt_torch__fail(in, CKPT_EFORMAT, path,
                                    "storage %s%s of %llu bytes does not hold whole %s elements", in->key_prefix,
                                    key, (unsigned long long)nbytes, ckpt_dtype_name(dtype));
    } else if (CKPT_MUL_OVERFLOWS(numel, (uint64_t)item, &nbytes)) {
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "storage %s%s is too large (%llu elements)", in->key_prefix,
                                key, (unsigned long long)numel);
    }
    if (in->byteswap && (dtype == CKPT_DTYPE_C64 || dtype == CKPT_DTYPE_C128))
        return ckpt_torch__fail(in, CKPT_EUNSUPPORTED, path, "big-endian complex storage %s%s not supported",
                                in->key_prefix, key);
    name = ckpt_arena_alloc(arena, plen + klen + 1);
    if (!name)
        return CKPT_ENOMEM;
    memcpy(name, in->key_prefix, plen);
    memcpy(name + plen, key, klen + 1);
    memset(&ref, 0, sizeof ref);
    ref.key = name + plen;
    ref.numel = numel;
    ref.path = path;
    ref.storage = ckpt_reader_new_storage(in->reader, name, dtype, 1);
    if (!ref.storage)
        return CKPT_ENOMEM;
    ref.storage->nbytes = nbytes;
    ref.storage->byteswap = in->byteswap;
    rc = add_ref(in, &ref);
    if (rc < 0)
        return rc;
    *out = &in->refs[in->n_refs - 1];
    return 0;
}

static int parse_view(const ckpt_torch_interp *in, const ckpt_value *vm, const ckpt_torch_storage_ref *ref,
                      const char *path, ckpt_torch_pid *info)
{
    int64_t elems = (int64_t)(ref->storage->nbytes / ckpt_dtype_size(ref->storage->dtype));
    const ckpt_value *off = tuple_item(vm, 1), *size = tuple_item(vm, 2);
    const char *s;
    size_t len;

    if (vm->kind != CKPT_VAL_TUPLE || vm->u.seq.n != 3 || !value_text(tuple_item(vm, 0), &s, &len) ||
        off->kind != CKPT_VAL_INT || size->kind != CKPT_VAL_INT || off->u.integer < 0 ||
        size->u.integer < 0 || off->u.integer > elems || size->u.integer > elems - off->u.integer)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "bad storage view of %s%s", in->key_prefix, ref->key);
    info->view_offset = off->u.integer;
    info->limit = size->u.integer;
    return 0;
}

int ckpt_torch__resolve_pid(ckpt_torch_interp *in, const ckpt_value *sv, const char *path, ckpt_dtype *dtype,
                            ckpt_torch_pid *info)
{
    const ckpt_value *pid, *numel_v, *vm;
    ckpt_dtype cls_dtype = CKPT_DTYPE_INVALID, t;
    const char *s;
    size_t len, want = in->legacy ? 6 : 5;
    int untyped, rc;
    char *key;
    ckpt_torch_storage_ref *ref;

    if (!sv || sv->kind != CKPT_VAL_PERSID)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor storage is not a persistent id");
    pid = sv->u.persid.pid;
    if (!pid || pid->kind != CKPT_VAL_TUPLE || pid->u.seq.n == 0)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "persistent id is not a tuple");
    if (text_is(pid->u.seq.items[0], "module"))
        return ckpt_torch__fail(in, CKPT_EUNSUPPORTED, path, "pickled nn.Module class (torch.save of a whole "
                                "model); save model.state_dict() instead");
    if (!text_is(pid->u.seq.items[0], "storage") || pid->u.seq.n != want)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path,
                                "persistent id is not ('storage', type, key, location, numel%s)",
                                in->legacy ? ", view" : "");
    rc = storage_class_dtype(in, pid->u.seq.items[1], path, &cls_dtype, &untyped);
    if (rc < 0)
        return rc;
    t = *dtype;
    if (t == CKPT_DTYPE_INVALID)
        t = cls_dtype;
    else if (!untyped && t != cls_dtype)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "tensor of dtype %s on a %s storage", ckpt_dtype_name(t),
                                ckpt_dtype_name(cls_dtype));
    if (!value_text(pid->u.seq.items[2], &s, &len) || len == 0 || memchr(s, '\0', len))
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "storage key is not a string");
    key = ckpt_arena_strndup(ckpt_reader_arena(in->reader), s, len);
    if (!key)
        return CKPT_ENOMEM;
    if (!value_text(pid->u.seq.items[3], &s, &len))
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "storage location is not a string");
    if (len == 4 && memcmp(s, "meta", 4) == 0)
        return ckpt_torch__fail(in, CKPT_EUNSUPPORTED, path, "meta tensor (no data) not supported");
    numel_v = pid->u.seq.items[4];
    if (numel_v->kind != CKPT_VAL_INT || numel_v->u.integer < 0)
        return ckpt_torch__fail(in, CKPT_EFORMAT, path, "storage size is not a non-negative integer");

    ref = ckpt_torch__find_ref(in, key);
    if (ref) {
        if (ref->storage->dtype != t)
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "storage %s%s is used as %s and as %s", in->key_prefix,
                                    key, ckpt_dtype_name(ref->storage->dtype), ckpt_dtype_name(t));
        if (ref->numel != (uint64_t)numel_v->u.integer)
            return ckpt_torch__fail(in, CKPT_EFORMAT, path, "storage %s%s is declared with sizes %llu and %lld",
                                    in->key_prefix, key, (unsigned long long)ref->numel,
                                    (long long)numel_v->u.integer);
    } else {
        rc = new_ref(in, key, t, (uint64_t)numel_v->u.integer, untyped, path, &ref);
        if (rc < 0)
            return rc;
    }
    *dtype = t;
    info->ref = ref;
    info->view_offset = 0;
    info->limit = (int64_t)(ref->storage->nbytes / ckpt_dtype_size(t));
    vm = in->legacy ? pid->u.seq.items[5] : NULL;
    if (vm && vm->kind != CKPT_VAL_NONE)
        return parse_view(in, vm, ref, path, info);
    return 0;
}
