/* Iterative depth-first walk over a value tree that may share nodes or contain cycles:
 * a pointer set marks visited nodes, an explicit stack replaces recursion, and the path
 * string grows and shrinks with the stack. Children come in one fixed order, which the
 * pickle reader and writer follow as well:
 *   sequences: items;  DICT: (cls), then each key "(key i)" and value, then (state);
 *   OBJECT: (callable), (args), (kwargs), list_items, dict_items as for DICT, (state);
 *   PERSID: (pid);  TENSOR: (source). */
#include <ckpt/sys/table.h>
#include "value_private.h"

#include <ckpt/buf.h>
#include <ckpt/sys/common.h>

#include <stdlib.h>
#include <string.h>

/* Path components longer than this are cut, so a deep chain of long shared keys
 * cannot make the path grow with depth times key size. */
#define LABEL_MAX 1024

typedef struct frame {
    const ckpt_value *v;
    size_t slot;
    size_t path_len;
} frame;

typedef struct label {
    char text[LABEL_MAX + 1];
    int on; /* labels are only produced when paths are wanted */
} label;

static void label_set(label *l, const char *prefix, size_t i, const char *suffix)
{
    char digits[24], *d = digits + sizeof digits;
    size_t p = strlen(prefix), s = strlen(suffix), n;

    if (!l->on)
        return;
    *--d = '\0';
    do
        *--d = (char)('0' + i % 10);
    while ((i /= 10) != 0);
    n = strlen(d);
    memcpy(l->text, prefix, p);
    memcpy(l->text + p, d, n);
    memcpy(l->text + p + n, suffix, s + 1);
}

/* The text of a dict key as a path component. */
static void label_key(label *l, const ckpt_value *key)
{
    size_t n;

    if (!l->on)
        return;
    if (key && key->kind == CKPT_VAL_STR) {
        n = key->u.str.len < LABEL_MAX ? key->u.str.len : LABEL_MAX;
        while (n > 0 && n < key->u.str.len && ((unsigned char)key->u.str.ptr[n] & 0xC0) == 0x80)
            n--;
        memcpy(l->text, key->u.str.ptr, n);
        l->text[n] = '\0';
    } else if (key && key->kind == CKPT_VAL_INT && key->u.integer < 0) {
        label_set(l, "-", (size_t)0 - (size_t)key->u.integer, "");
    } else if (key && key->kind == CKPT_VAL_INT) {
        label_set(l, "", (size_t)key->u.integer, "");
    } else {
        ckpt_value_repr(key, l->text, 128);
    }
}

static const ckpt_value *named(const ckpt_value *c, const char *name, label *l)
{
    if (l->on)
        strcpy(l->text, name);
    return c;
}

/* Entry `slot` of map m as key/value children: slots 2i and 2i+1. */
static const ckpt_value *map_child(const ckpt_value_map *m, size_t slot, label *l)
{
    size_t i = slot / 2;

    if (slot % 2 == 0) {
        label_set(l, "(key ", i, ")");
        return m->keys[i];
    }
    label_key(l, m->keys[i]);
    return m->vals[i];
}

/* The child in `slot` (possibly NULL for an absent optional part); 0 when past the end. */
static int child_at(const ckpt_value *v, size_t slot, const ckpt_value **c, label *l)
{
    size_t n;

    switch (v->kind) {
    case CKPT_VAL_TUPLE: case CKPT_VAL_LIST: case CKPT_VAL_SET: case CKPT_VAL_FROZENSET:
        if (slot >= v->u.seq.n)
            return 0;
        label_set(l, "", slot, "");
        *c = v->u.seq.items[slot];
        return 1;
    case CKPT_VAL_DICT:
        n = v->u.dict.map.n;
        if (slot == 0)
            *c = named(v->u.dict.cls, "(cls)", l);
        else if (slot <= 2 * n)
            *c = map_child(&v->u.dict.map, slot - 1, l);
        else if (slot == 2 * n + 1)
            *c = named(v->u.dict.state, "(state)", l);
        else
            return 0;
        return 1;
    case CKPT_VAL_OBJECT:
        n = v->u.obj.list_items.n;
        if (slot == 0) {
            *c = named(v->u.obj.callable, "(callable)", l);
        } else if (slot == 1) {
            *c = named(v->u.obj.args, "(args)", l);
        } else if (slot == 2) {
            *c = named(v->u.obj.kwargs, "(kwargs)", l);
        } else if (slot < 3 + n) {
            label_set(l, "", slot - 3, "");
            *c = v->u.obj.list_items.items[slot - 3];
        } else if (slot < 3 + n + 2 * v->u.obj.dict_items.n) {
            *c = map_child(&v->u.obj.dict_items, slot - 3 - n, l);
        } else if (slot == 3 + n + 2 * v->u.obj.dict_items.n) {
            *c = named(v->u.obj.state, "(state)", l);
        } else {
            return 0;
        }
        return 1;
    case CKPT_VAL_PERSID:
        if (slot)
            return 0;
        *c = named(v->u.persid.pid, "(pid)", l);
        return 1;
    case CKPT_VAL_TENSOR:
        if (slot)
            return 0;
        *c = named(v->u.tensor.source, "(source)", l);
        return 1;
    default:
        return 0;
    }
}

static int append_label(ckpt_buf *path, const char *text)
{
    int rc = path->len ? ckpt_buf_putc(path, '/') : 0;
    return rc ? rc : ckpt_buf_puts(path, text);
}

/* Failing beyond max_depth: the path down to the offending node, rebuilt from the
 * stack when the walk did not keep one. */
static int too_deep(const frame *stack, size_t depth, unsigned max_depth, ckpt_buf *path, int have_path,
                    const char *last)
{
    const ckpt_value *c;
    label l;
    size_t k;

    if (!have_path) {
        l.on = 1;
        ckpt_buf_clear(path);
        for (k = 0; k + 1 < depth; k++)
            if (child_at(stack[k].v, stack[k].slot - 1, &c, &l) && append_label(path, l.text) != 0)
                break;
        if (append_label(path, last) != 0)
            ckpt_error_clear();
    }
    return ckpt_error_set(CKPT_EFORMAT, "value tree nested deeper than %u levels at '%.200s'", max_depth,
                          path->data ? (const char *)path->data : "");
}

int ckpt_value__walk(const ckpt_value *root, unsigned max_depth, ckpt_value_shared_fn shared, ckpt_value_visit_fn fn,
                     void *payload)
{
    ckpt_u64map seen = CKPT_U64MAP_INIT;
    ckpt_buf path = CKPT_BUF_INIT;
    frame *stack = NULL;
    size_t depth, cap = 16;
    label l;
    int rc, paths = shared == NULL;

    if (!root)
        return 0;
    l.on = 1;
    if ((rc = ckpt_buf_reserve(&path, 64)) != 0)
        goto done;
    path.data[0] = '\0';
    if ((!shared || shared(root, payload)) && (rc = ckpt_u64map_set(&seen, ckpt_u64map_ptrkey(root), 0)) != 0)
        goto done;
    if ((rc = fn(root, paths ? (const char *)path.data : NULL, payload)) != 0)
        goto done;
    if (!(stack = malloc(cap * sizeof *stack))) {
        rc = ckpt_error_oom();
        goto done;
    }
    stack[0].v = root;
    stack[0].slot = 0;
    stack[0].path_len = 0;
    depth = 1;
    l.on = paths;
    while (depth) {
        frame *f = &stack[depth - 1];
        const ckpt_value *c = NULL;
        int track;

        if (!child_at(f->v, f->slot++, &c, &l)) {
            depth--;
            continue;
        }
        if (!c)
            continue;
        track = !shared || shared(c, payload);
        if (track && ckpt_u64map_get(&seen, ckpt_u64map_ptrkey(c), NULL))
            continue;
        if (paths) {
            path.len = f->path_len;
            if ((rc = append_label(&path, l.text)) != 0)
                goto done;
        }
        if (depth > max_depth) {
            if (!paths) {
                l.on = 1;
                child_at(f->v, f->slot - 1, &c, &l);
            }
            rc = too_deep(stack, depth, max_depth, &path, paths, l.text);
            goto done;
        }
        if ((track && (rc = ckpt_u64map_set(&seen, ckpt_u64map_ptrkey(c), 0)) != 0) ||
            (rc = fn(c, paths ? (const char *)path.data : NULL, payload)) != 0)
            goto done;
        if (depth == cap) {
            frame *bigger = realloc(stack, 2 * cap * sizeof *stack);
            if (!bigger) {
                rc = ckpt_error_oom();
                goto done;
            }
            stack = bigger;
            cap *= 2;
        }
        stack[depth].v = c;
        stack[depth].slot = 0;
        stack[depth].path_len = path.len;
        depth++;
    }
done:
    free(stack);
    ckpt_buf_dispose(&path);
    ckpt_u64map_dispose(&seen);
    return rc;
}

int ckpt_value_walk(const ckpt_value *root, unsigned max_depth, ckpt_value_visit_fn fn, void *payload)
{
    return ckpt_value__walk(root, max_depth, NULL, fn, payload);
}
