/* What REDUCE stands for, decided from the callable's name and the argument shapes;
 * nothing is called. The few reductions with a plain value meaning become that value:
 *   _codecs.encode(str, 'latin1')       BYTES (latin-1 text left in place, zero copy)
 *   builtins.bytearray(bytes | str, 'latin-1' | )   BYTES | BYTEARRAY
 *   builtins.bytes()                    empty BYTES (protocol < 3 pickles b'' this way)
 *   builtins.set/frozenset(list | tuple | )          SET / FROZENSET (items copied)
 *   collections.OrderedDict()           DICT with cls, so SETITEMS and BUILD apply to it
 *   copyreg.__newobj__(cls, *args)      OBJECT as NEWOBJ; __newobj_ex__ as NEWOBJ_EX
 * Anything else is an OBJECT recording callable and args. Arguments that do not have
 * the expected shape leave the reduction generic rather than failing.
 *
 * builtins.getattr and copyreg._reconstructor are known globals only when applied to
 * known classes: getattr(KnownClass, 'NAME') (how enum members are pickled) with a
 * name that is not a dunder, _reconstructor(KnownClass, KnownBase, state). Otherwise
 * the object's callable becomes a private copy of the GLOBAL flagged
 * CKPT_VALUE_UNSAFE (the GLOBAL itself may be memo-shared with safe uses). */
#include "pickle_private.h"

#include <string.h>

static int is_known_class(const ckpt_value *v)
{
    return v->kind == CKPT_VAL_GLOBAL && !(v->flags & CKPT_VALUE_UNSAFE);
}

static int is_latin1_codec(const ckpt_value *v)
{
    return ckpt_value_is_str(v, "latin1") || ckpt_value_is_str(v, "latin-1");
}

/* BYTES for a str of latin-1 code points, or NULL (no error) when it has others. */
static ckpt_value *latin1_bytes(ckpt_pickle_vm *vm, const ckpt_value *s, int *failed)
{
    uint64_t cached = 0;
    size_t n;
    ckpt_value *v;

    /* A memo-shared str can be encoded many times; scan it once. */
    if (ckpt_u64map_get(&vm->latin1_len, ckpt_u64map_ptrkey(s), &cached)) {
        n = cached ? (size_t)(cached - 1) : SIZE_MAX;
    } else {
        n = ckpt_pickle__latin1_len((const uint8_t *)s->u.str.ptr, s->u.str.len);
        if (ckpt_u64map_set(&vm->latin1_len, ckpt_u64map_ptrkey(s), n == SIZE_MAX ? 0 : (uint64_t)n + 1) != 0) {
            *failed = 1;
            return NULL;
        }
    }
    if (n == SIZE_MAX)
        return NULL;
    if (!(v = ckpt_pickle__node(vm, CKPT_VAL_BYTES))) {
        *failed = 1;
        return NULL;
    }
    v->u.bytes.ptr = (const uint8_t *)s->u.str.ptr;
    v->u.bytes.len = s->u.str.len;
    v->u.bytes.decoded_len = n;
    /* Pure ASCII text is already the bytes. */
    if (n != s->u.str.len)
        v->flags = CKPT_BYTES_LATIN1_UTF8;
    return v;
}

static ckpt_value *bytearray_of(ckpt_pickle_vm *vm, ckpt_value **a, size_t n, int *failed)
{
    ckpt_value *v;

    if (n == 2 && a[0]->kind == CKPT_VAL_STR && is_latin1_codec(a[1])) {
        v = latin1_bytes(vm, a[0], failed);
    } else if (n == 0 || (n == 1 && a[0]->kind == CKPT_VAL_BYTES)) {
        if ((v = ckpt_pickle__node(vm, CKPT_VAL_BYTES)) == NULL)
            *failed = 1;
        else if (n == 1)
            *v = *a[0];
    } else {
        return NULL;
    }
    if (v)
        v->flags |= CKPT_BYTES_BYTEARRAY;
    return v;
}

static ckpt_value *set_of(ckpt_pickle_vm *vm, ckpt_value_kind kind, ckpt_value **a, size_t n, int *failed)
{
    ckpt_value *v;

    size_t i;

    if (n > 1 || (n == 1 && a[0]->kind != CKPT_VAL_LIST && a[0]->kind != CKPT_VAL_TUPLE))
        return NULL;
    v = n ? ckpt_pickle__seq(vm, kind, a[0]->u.seq.items, a[0]->u.seq.n) : ckpt_pickle__node(vm, kind);
    /* The items now belong to the list (if the memo keeps it) and to the set. */
    for (i = 0; v && n && i < v->u.seq.n; i++)
        if (ckpt_pickle__share(vm, v->u.seq.items[i]) != 0)
            v = NULL;
    if (!v)
        *failed = 1;
    return v;
}

/* The arguments are taken over by a new node while the args tuple may live on in the memo. */
static int share_all(ckpt_pickle_vm *vm, ckpt_value **a, size_t n)
{
    size_t i;
    int rc = 0;

    for (i = 0; i < n && rc == 0; i++)
        rc = ckpt_pickle__share(vm, a[i]);
    return rc;
}

/* The plain value a reduction stands for, NULL when it stays a generic object. */
static ckpt_value *interpret(ckpt_pickle_vm *vm, ckpt_value *f, ckpt_value **a, size_t n, int *failed)
{
    ckpt_value *v = NULL, *args;

    if (ckpt_value_is_global(f, "_codecs", "encode")) {
        if (n == 2 && a[0]->kind == CKPT_VAL_STR && is_latin1_codec(a[1]))
            v = latin1_bytes(vm, a[0], failed);
    } else if (ckpt_value_is_global(f, "builtins", "bytearray")) {
        v = bytearray_of(vm, a, n, failed);
    } else if (ckpt_value_is_global(f, "builtins", "bytes")) {
        if (n == 0 && !(v = ckpt_pickle__node(vm, CKPT_VAL_BYTES)))
            *failed = 1;
    } else if (ckpt_value_is_global(f, "builtins", "set")) {
        v = set_of(vm, CKPT_VAL_SET, a, n, failed);
    } else if (ckpt_value_is_global(f, "builtins", "frozenset")) {
        v = set_of(vm, CKPT_VAL_FROZENSET, a, n, failed);
    } else if (ckpt_value_is_global(f, "collections", "OrderedDict")) {
        if (n == 0) {
            if ((v = ckpt_pickle__node(vm, CKPT_VAL_DICT)) != NULL)
                v->u.dict.cls = f;
            else
                *failed = 1;
        }
    } else if (ckpt_value_is_global(f, "copyreg", "__newobj__")) {
        if (n >= 1 && (share_all(vm, a, n) || !(args = ckpt_pickle__seq(vm, CKPT_VAL_TUPLE, a + 1, n - 1)) ||
                       !(v = ckpt_pickle__object(vm, CKPT_OBJ_NEWOBJ, a[0], args, NULL))))
            *failed = 1;
    } else if (ckpt_value_is_global(f, "copyreg", "__newobj_ex__")) {
        if (n == 3 && a[1]->kind == CKPT_VAL_TUPLE && a[2]->kind == CKPT_VAL_DICT &&
            (share_all(vm, a, n) || !(v = ckpt_pickle__object(vm, CKPT_OBJ_NEWOBJ_EX, a[0], a[1], a[2]))))
            *failed = 1;
    }
    return v;
}

/* getattr / _reconstructor applied to something other than known classes. */
static int unsafe_use(const ckpt_value *f, ckpt_value **a, size_t n)
{
    if (ckpt_value_is_global(f, "builtins", "getattr"))
        return !(n == 2 && is_known_class(a[0]) && a[1]->kind == CKPT_VAL_STR &&
                 !(a[1]->u.str.len >= 2 && a[1]->u.str.ptr[0] == '_' && a[1]->u.str.ptr[1] == '_'));
    if (ckpt_value_is_global(f, "copyreg", "_reconstructor"))
        return !(n == 3 && is_known_class(a[0]) && is_known_class(a[1]));
    return 0;
}

int ckpt_pickle__reduce(ckpt_pickle_vm *vm, ckpt_value *callable, ckpt_value *args, ckpt_value **out)
{
    ckpt_value **a = args->u.seq.items, *copy;
    size_t n = args->u.seq.n;
    int failed = 0;

    *out = NULL;
    if (callable->kind == CKPT_VAL_GLOBAL) {
        *out = interpret(vm, callable, a, n, &failed);
        if (failed)
            return ckpt_pickle__failure();
        if (*out)
            return 0;
        if (unsafe_use(callable, a, n)) {
            if (!(copy = ckpt_pickle__node(vm, CKPT_VAL_GLOBAL)))
                return ckpt_pickle__failure();
            *copy = *callable;
            copy->flags |= CKPT_VALUE_UNSAFE;
            callable = copy;
        }
    }
    *out = ckpt_pickle__object(vm, CKPT_OBJ_REDUCE, callable, args, NULL);
    return *out ? 0 : ckpt_pickle__failure();
}
