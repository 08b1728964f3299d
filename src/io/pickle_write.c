/* The pickle writer: protocol 2 as torch.save writes it, or protocol 4 (unframed; CPython
 * reads streams without FRAMEs). Output is a byte buffer plus "holes", ranges whose
 * content (tensor data) the caller writes later, so memory follows the metadata only.
 *
 * Every str, bytes, container (but the empty tuple, as in CPython), object, persistent id
 * and tensor node is memoised by pointer the first time it is written and fetched with
 * BINGET afterwards, so sharing and cycles survive a round trip. As in CPython, lists, dicts, sets and objects are
 * memoised before their items, which is what lets a list contain itself; tuples and
 * frozensets (and objects, with respect to their arguments) are memoised after, and
 * when one turns out to have been memoised while its parts were written (a cycle
 * through a list), what was written is popped and the memo entry fetched instead.
 * Cycles that Python cannot build (a set inside a tuple inside that set, at protocol 2)
 * end at the nesting limit with CKPT_EINVALID.
 *
 * How each value is written:
 *   DICT with cls      cls () REDUCE, items, then state BUILD
 *   OBJECT             callable args REDUCE | cls args NEWOBJ | cls args kwargs NEWOBJ_EX
 *                      (protocol 2: copyreg.__newobj_ex__(cls, args, kwargs)), then
 *                      list_items APPENDS, dict_items SETITEMS, state BUILD
 *   SET, FROZENSET     protocol 4: EMPTY_SET ADDITEMS / MARK FROZENSET;
 *                      protocol 2: builtins.set([...]) / frozenset([...])
 *   bytearray          builtins.bytearray(bytes), or bytearray() when empty
 *   PERSID             pid BINPERSID;  TENSOR: the caller's callback */
#include "pickle_private.h"

#include <stdlib.h>
#include <string.h>

#define BATCH 1000           /* items per APPENDS/SETITEMS/ADDITEMS, as CPython */
#define MAX_WRITE_DEPTH 2048 /* nested values, counting cycle re-entries */

int ckpt_pickler_new(ckpt_pickler **out, int protocol, ckpt_pickler_tensor_fn tensor_fn, void *payload)
{
    ckpt_pickler *p;

    if (!out)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_pickler_new: no output");
    *out = NULL;
    if (protocol != 2 && protocol != 4)
        return ckpt_error_set(CKPT_EINVALID, "pickle protocol %d cannot be written (2 or 4)", protocol);
    if (!(p = calloc(1, sizeof *p)))
        return ckpt_error_oom();
    p->protocol = protocol;
    p->tensor_fn = tensor_fn;
    p->payload = payload;
    p->latin1_memo = UINT64_MAX;
    p->state = CKPT_PICKLER_NEW;
    *out = p;
    return 0;
}

void ckpt_pickler_free(ckpt_pickler *p)
{
    size_t i;

    if (!p)
        return;
    ckpt_buf_dispose(&p->out);
    free(p->holes);
    ckpt_u64map_dispose(&p->memo);
    ckpt_u64map_dispose(&p->by_name);
    for (i = 0; i < p->nglobals; i++)
        free(p->globals[i].key);
    free(p->globals);
    free(p->marks);
    free(p);
}

int ckpt_pickler_protocol(const ckpt_pickler *p)
{
    return p->protocol;
}

int ckpt_pickler_begin(ckpt_pickler *p)
{
    uint8_t b[2] = { OP_PROTO, 0 };
    int rc;

    if (p->state != CKPT_PICKLER_NEW)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_pickler_begin called twice");
    b[1] = (uint8_t)p->protocol;
    if ((rc = ckpt_buf_append(&p->out, b, sizeof b)) != 0)
        return ckpt_pickler__fail(p, rc);
    p->state = CKPT_PICKLER_OPEN;
    return 0;
}

int ckpt_pickler_end(ckpt_pickler *p)
{
    int rc = ckpt_pickler__check(p);

    if (rc)
        return rc;
    if (p->nmarks)
        return ckpt_pickler__fail(p, ckpt_error_set(CKPT_EINVALID, "pickle ended with %zu open MARKs", p->nmarks));
    if ((rc = ckpt_pickler__op(p, OP_STOP)) != 0)
        return ckpt_pickler__fail(p, rc);
    p->state = CKPT_PICKLER_DONE;
    return 0;
}

uint64_t ckpt_pickler_size(const ckpt_pickler *p)
{
    return p->out.len + p->hole_bytes;
}

size_t ckpt_pickler_hole_count(const ckpt_pickler *p)
{
    return p->nholes;
}

const ckpt_pickle_hole *ckpt_pickler_hole_at(const ckpt_pickler *p, size_t i)
{
    return i < p->nholes ? &p->holes[i].h : NULL;
}

int ckpt_pickler_emit(const ckpt_pickler *p, ckpt_pickler_write_fn write, void *payload)
{
    uint64_t offset = 0;
    size_t from = 0, i;
    int rc;

    if (p->state != CKPT_PICKLER_DONE)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_pickler_emit before ckpt_pickler_end");
    for (i = 0; i <= p->nholes; i++) {
        size_t to = i < p->nholes ? p->holes[i].buf_pos : p->out.len;
        if (to > from && (rc = write(offset, p->out.data + from, to - from, payload)) != 0)
            return rc;
        offset += to - from;
        if (i < p->nholes)
            offset += p->holes[i].h.size;
        from = to;
    }
    return 0;
}

/* ---- value trees --------------------------------------------------------------- */

static int emit(ckpt_pickler *p, const ckpt_value *v);

/* APPEND(S) or SETITEM(S) in batches of BATCH. CPython writes the items of an object's
 * __reduce__ with a single APPEND/SETITEM for any batch of one; a list or dict of its own
 * gets the single form only when it has one item, and a dict of exactly k*BATCH items
 * ends with an empty MARK SETITEMS. Both are followed here, so output matches CPython's. */
static int emit_batches(ckpt_pickler *p, ckpt_value *const *items, ckpt_value *const *vals, size_t n, int own)
{
    size_t i, j, m;
    int rc, single;

    for (i = 0; i < n || (own && vals && n > 1 && i == n && n % BATCH == 0); i += m) {
        m = n - i < BATCH ? n - i : BATCH;
        single = own ? n == 1 : m == 1;
        if (!single && (rc = ckpt_pickler__op(p, OP_MARK)) != 0)
            return rc;
        for (j = i; j < i + m; j++)
            if ((rc = emit(p, items[j])) != 0 || (vals && (rc = emit(p, vals[j])) != 0))
                return rc;
        if ((rc = ckpt_pickler__op(p, single ? (vals ? OP_SETITEM : OP_APPEND) : (vals ? OP_SETITEMS : OP_APPENDS))))
            return rc;
        if (m == 0)
            break;
    }
    return 0;
}

/* As CPython, a set of exactly k*BATCH items ends with an empty MARK ADDITEMS. */
static int emit_additems(ckpt_pickler *p, const ckpt_value_seq *s)
{
    size_t i, j, m;
    int rc;

    for (i = 0; i < s->n || (i == s->n && s->n && s->n % BATCH == 0); i += m) {
        m = s->n - i < BATCH ? s->n - i : BATCH;
        if ((rc = ckpt_pickler__op(p, OP_MARK)) != 0)
            return rc;
        for (j = i; j < i + m; j++)
            if ((rc = emit(p, s->items[j])) != 0)
                return rc;
        if ((rc = ckpt_pickler__op(p, OP_ADDITEMS)) != 0)
            return rc;
        if (m == 0)
            break;
    }
    return 0;
}

/* TUPLE or (protocol 4) FROZENSET: items first, memoised after. */
static int emit_immutable(ckpt_pickler *p, const ckpt_value *v)
{
    const ckpt_value_seq *s = &v->u.seq;
    int marked = v->kind == CKPT_VAL_FROZENSET || s->n > 3;
    size_t i;
    int rc;

    /* (), an immutable singleton in Python, is never memoised there either. */
    if (v->kind == CKPT_VAL_TUPLE && s->n == 0)
        return ckpt_pickler__op(p, OP_EMPTY_TUPLE);
    if (marked && (rc = ckpt_pickler__op(p, OP_MARK)) != 0)
        return rc;
    for (i = 0; i < s->n; i++)
        if ((rc = emit(p, s->items[i])) != 0)
            return rc;
    if (ckpt_pickler__memoised(p, v))
        return marked ? ckpt_pickler__refetch(p, v, OP_POP_MARK, 1) : ckpt_pickler__refetch(p, v, OP_POP, s->n);
    if (v->kind == CKPT_VAL_FROZENSET)
        rc = ckpt_pickler__op(p, OP_FROZENSET);
    else
        rc = ckpt_pickler__op(p, marked ? OP_TUPLE : (uint8_t)(OP_TUPLE1 + s->n - 1));
    return rc ? rc : ckpt_pickler__memo_node(p, v);
}

static int emit_set(ckpt_pickler *p, const ckpt_value *v)
{
    int rc;

    if (p->protocol >= 4) {
        if (v->kind == CKPT_VAL_FROZENSET)
            return emit_immutable(p, v);
        if ((rc = ckpt_pickler__op(p, OP_EMPTY_SET)) || (rc = ckpt_pickler__memo_node(p, v)))
            return rc;
        return emit_additems(p, &v->u.seq);
    }
    if ((rc = ckpt_pickler__put_global(p, "builtins", v->kind == CKPT_VAL_SET ? "set" : "frozenset")) ||
        (rc = ckpt_pickler__op(p, OP_EMPTY_LIST)) || (rc = ckpt_pickler__memo_temp(p)) ||
        (rc = emit_batches(p, v->u.seq.items, NULL, v->u.seq.n, 1)) || (rc = ckpt_pickler__op(p, OP_TUPLE1)) ||
        (rc = ckpt_pickler__memo_temp(p)) || (rc = ckpt_pickler__op(p, OP_REDUCE)))
        return rc;
    if (ckpt_pickler__memoised(p, v))
        return ckpt_pickler__refetch(p, v, OP_POP, 1);
    return ckpt_pickler__memo_node(p, v);
}

static int emit_dict(ckpt_pickler *p, const ckpt_value *v)
{
    const ckpt_value_map *m = &v->u.dict.map;
    int rc;

    if (v->u.dict.cls) {
        if ((rc = emit(p, v->u.dict.cls)) || (rc = ckpt_pickler__op(p, OP_EMPTY_TUPLE)) ||
            (rc = ckpt_pickler__op(p, OP_REDUCE)))
            return rc;
        if (ckpt_pickler__memoised(p, v))
            return ckpt_pickler__refetch(p, v, OP_POP, 1);
    } else if ((rc = ckpt_pickler__op(p, OP_EMPTY_DICT)) != 0) {
        return rc;
    }
    if ((rc = ckpt_pickler__memo_node(p, v)) || (rc = emit_batches(p, m->keys, m->vals, m->n, 1)))
        return rc;
    if (v->u.dict.state && ((rc = emit(p, v->u.dict.state)) || (rc = ckpt_pickler__op(p, OP_BUILD))))
        return rc;
    return 0;
}

static int emit_args(ckpt_pickler *p, const ckpt_value *args)
{
    if (!args)
        return ckpt_pickler__op(p, OP_EMPTY_TUPLE);
    if (args->kind != CKPT_VAL_TUPLE)
        return ckpt_error_set(CKPT_EINVALID, "object arguments must be a tuple, not kind %d", (int)args->kind);
    return emit(p, args);
}

static int emit_object(ckpt_pickler *p, const ckpt_value *v)
{
    const ckpt_value *kwargs = v->u.obj.kwargs;
    ckpt_object_how how = v->u.obj.how;
    int rc;

    if (!v->u.obj.callable)
        return ckpt_error_set(CKPT_EINVALID, "object without a callable");
    if (how == CKPT_OBJ_NEWOBJ_EX && (!kwargs || kwargs->kind != CKPT_VAL_DICT))
        return ckpt_error_set(CKPT_EINVALID, "NEWOBJ_EX object without a kwargs dict");
    if (how == CKPT_OBJ_NEWOBJ_EX && p->protocol < 4) {
        if ((rc = ckpt_pickler__put_global(p, "copyreg", "__newobj_ex__")) || (rc = emit(p, v->u.obj.callable)) ||
            (rc = emit_args(p, v->u.obj.args)) || (rc = emit(p, kwargs)) || (rc = ckpt_pickler__op(p, OP_TUPLE3)) ||
            (rc = ckpt_pickler__memo_temp(p)) || (rc = ckpt_pickler__op(p, OP_REDUCE)))
            return rc;
    } else {
        if ((rc = emit(p, v->u.obj.callable)) || (rc = emit_args(p, v->u.obj.args)) ||
            (how == CKPT_OBJ_NEWOBJ_EX && (rc = emit(p, kwargs))))
            return rc;
        rc = ckpt_pickler__op(p, how == CKPT_OBJ_REDUCE   ? OP_REDUCE
                                 : how == CKPT_OBJ_NEWOBJ ? OP_NEWOBJ
                                                          : OP_NEWOBJ_EX);
        if (rc)
            return rc;
    }
    if (ckpt_pickler__memoised(p, v))
        return ckpt_pickler__refetch(p, v, OP_POP, 1);
    if ((rc = ckpt_pickler__memo_node(p, v)) ||
        (rc = emit_batches(p, v->u.obj.list_items.items, NULL, v->u.obj.list_items.n, 0)) ||
        (rc = emit_batches(p, v->u.obj.dict_items.keys, v->u.obj.dict_items.vals, v->u.obj.dict_items.n, 0)))
        return rc;
    if (v->u.obj.state && ((rc = emit(p, v->u.obj.state)) || (rc = ckpt_pickler__op(p, OP_BUILD))))
        return rc;
    return 0;
}

static int emit_bytes(ckpt_pickler *p, const ckpt_value *v)
{
    uint64_t idx = 0;
    int rc;

    if (!(v->flags & CKPT_BYTES_BYTEARRAY))
        return (rc = ckpt_pickler__put_bytes(p, v, NULL, 0, &idx)) ? rc : ckpt_pickler__memo_bind(p, v, idx);
    /* bytearray(bytes), or bytearray() when empty, as CPython reduces it. */
    if ((rc = ckpt_pickler__put_global(p, "builtins", "bytearray")) != 0)
        return rc;
    if (ckpt_value_bytes_size(v) == 0)
        rc = ckpt_pickler__op(p, OP_EMPTY_TUPLE);
    else if ((rc = ckpt_pickler__put_bytes(p, v, NULL, 0, &idx)) == 0 && (rc = ckpt_pickler__op(p, OP_TUPLE1)) == 0)
        rc = ckpt_pickler__memo_temp(p);
    if (rc || (rc = ckpt_pickler__op(p, OP_REDUCE)))
        return rc;
    return ckpt_pickler__memo_node(p, v);
}

static int emit_kind(ckpt_pickler *p, const ckpt_value *v)
{
    int rc;

    switch (v->kind) {
    case CKPT_VAL_NONE: return ckpt_pickler__op(p, OP_NONE);
    case CKPT_VAL_BOOL: return ckpt_pickler__op(p, v->u.boolean ? OP_NEWTRUE : OP_NEWFALSE);
    case CKPT_VAL_INT: return ckpt_pickler__put_int(p, v->u.integer);
    case CKPT_VAL_BIGINT: return ckpt_pickler__put_long(p, v->u.bigint.data, v->u.bigint.len);
    case CKPT_VAL_FLOAT: return ckpt_pickler__put_float(p, v->u.real);
    case CKPT_VAL_GLOBAL: return ckpt_pickler__put_global(p, v->u.global.module, v->u.global.name);
    case CKPT_VAL_STR:
        return (rc = ckpt_pickler__put_str(p, v->u.str.ptr, v->u.str.len)) ? rc : ckpt_pickler__memo_node(p, v);
    case CKPT_VAL_BYTES: return emit_bytes(p, v);
    case CKPT_VAL_TUPLE: return emit_immutable(p, v);
    case CKPT_VAL_LIST:
        if ((rc = ckpt_pickler__op(p, OP_EMPTY_LIST)) || (rc = ckpt_pickler__memo_node(p, v)))
            return rc;
        return emit_batches(p, v->u.seq.items, NULL, v->u.seq.n, 1);
    case CKPT_VAL_DICT: return emit_dict(p, v);
    case CKPT_VAL_SET: case CKPT_VAL_FROZENSET: return emit_set(p, v);
    case CKPT_VAL_OBJECT: return emit_object(p, v);
    case CKPT_VAL_PERSID:
        if (!v->u.persid.pid)
            return ckpt_error_set(CKPT_EINVALID, "persistent id without a pid");
        if ((rc = emit(p, v->u.persid.pid)) || (rc = ckpt_pickler__op(p, OP_BINPERSID)))
            return rc;
        return ckpt_pickler__memoised(p, v) ? ckpt_pickler__refetch(p, v, OP_POP, 1) : ckpt_pickler__memo_node(p, v);
    case CKPT_VAL_TENSOR:
        if (!p->tensor_fn)
            return ckpt_error_set(CKPT_EINVALID, "tensor #%zu in a value tree but no tensor callback",
                                  v->u.tensor.index);
        if ((rc = p->tensor_fn(p, v, p->payload)) != 0)
            return rc;
        if ((rc = ckpt_pickler__check(p)) != 0)
            return rc;
        return ckpt_pickler__memo_node(p, v);
    }
    return ckpt_error_set(CKPT_EINVALID, "value of unknown kind %d", (int)v->kind);
}

static int emit(ckpt_pickler *p, const ckpt_value *v)
{
    uint64_t idx = 0;
    int rc;

    if (!v)
        return ckpt_error_set(CKPT_EINVALID, "NULL value in a value tree");
    /* Scalars are never memoised (globals are, by name). */
    if (v->kind > CKPT_VAL_FLOAT && v->kind != CKPT_VAL_GLOBAL &&
        ckpt_u64map_get(&p->memo, ckpt_u64map_ptrkey(v), &idx))
        return ckpt_pickler__memo_get(p, idx);
    if (p->depth >= MAX_WRITE_DEPTH)
        return ckpt_error_set(CKPT_EINVALID, "value tree nested deeper than %d levels", MAX_WRITE_DEPTH);
    p->depth++;
    rc = emit_kind(p, v);
    p->depth--;
    return rc;
}

int ckpt_pickler_value(ckpt_pickler *p, const ckpt_value *v)
{
    int rc = ckpt_pickler__check(p);
    return rc ? rc : (rc = emit(p, v)) ? ckpt_pickler__fail(p, rc) : 0;
}
