/* ckpt_convert: decide what the output holds (tensors as views on blobs, the value tree
 * or not), refuse unsafe inputs, and hand the result to the output format's writer. */
#include "engine.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

ckpt_dtype ckpt_convert__dtype(ckpt_dtype in, const ckpt_convert_options *opts)
{
    if (opts->dtype != CKPT_DTYPE_INVALID && ckpt_dtype_is_float(in))
        return opts->dtype;
    return in;
}

typedef struct plan {
    ckpt_out out;
    ckpt_out_tensor *tensors;
    ckpt_out_blob *blobs;
    ckpt_blob_source *sources;
    ckpt_tensor *wholes; /* per blob: the whole storage as one 1-D view (plan_views) */
    size_t n_blobs;
    ckpt_graph *graph;
} plan;

static void plan_free(plan *p)
{
    free(p->tensors);
    free(p->blobs);
    free(p->sources);
    free(p->wholes);
    ckpt_graph_free(p->graph);
}

static int set_blob(plan *p, size_t b, const ckpt_tensor *view, ckpt_dtype dtype)
{
    p->sources[b].name = view->name;
    p->blobs[b].dtype = dtype;
    p->blobs[b].nbytes = (uint64_t)ckpt_tensor_numel(view) * ckpt_dtype_size(dtype);
    return ckpt_node_tensor(p->graph, view, &p->sources[b].node);
}

/* One contiguous blob per tensor. */
static int plan_dense(plan *p, const ckpt_ckpt *in, const ckpt_convert_options *opts)
{
    size_t i;
    int rc;
    for (i = 0; i < in->n_tensors; i++) {
        const ckpt_tensor *t = &in->tensors[i];
        ckpt_out_tensor *o = &p->tensors[i];
        ckpt_tensor shape_only = *t;

        o->name = t->name;
        o->dtype = ckpt_convert__dtype(t->dtype, opts);
        o->ndim = t->ndim;
        memcpy(o->shape, t->shape, sizeof o->shape);
        ckpt_tensor_set_contiguous(&shape_only);
        memcpy(o->stride, shape_only.stride, sizeof o->stride);
        o->offset = 0;
        o->blob = i;
        o->flags = t->flags;
        if ((rc = set_blob(p, i, t, o->dtype)) < 0)
            return rc;
    }
    p->n_blobs = in->n_tensors;
    return 0;
}

/* One blob per input storage; tensors stay views on it (shared storages, strides, offsets). */
static int plan_views(plan *p, const ckpt_ckpt *in, const ckpt_convert_options *opts)
{
    ckpt_u64map blob_of = CKPT_U64MAP_INIT; /* storage -> its blob */
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < in->n_tensors; i++) {
        const ckpt_tensor *t = &in->tensors[i];
        ckpt_out_tensor *o = &p->tensors[i];
        size_t esize = ckpt_dtype_size(t->dtype);
        uint64_t blob;

        o->name = t->name;
        o->dtype = ckpt_convert__dtype(t->dtype, opts);
        o->ndim = t->ndim;
        memcpy(o->shape, t->shape, sizeof o->shape);
        memcpy(o->stride, t->stride, sizeof o->stride);
        o->offset = t->offset;
        o->flags = t->flags;
        if (t->storage && ckpt_u64map_get(&blob_of, ckpt_u64map_ptrkey(t->storage), &blob)) {
            const ckpt_tensor *first = &p->wholes[blob];
            if (first->dtype != t->dtype) {
                rc = ckpt_error_set(CKPT_EUNSUPPORTED, "%s: tensors '%s' (%s) and '%s' (%s) view one storage",
                                    in->path, first->name, ckpt_dtype_name(first->dtype), t->name,
                                    ckpt_dtype_name(t->dtype));
                break;
            }
            o->blob = (size_t)blob;
            continue;
        }
        {
            ckpt_tensor *whole = &p->wholes[p->n_blobs];
            whole->name = t->name;
            whole->dtype = t->dtype;
            whole->storage = t->storage;
            whole->ndim = 1;
            whole->stride[0] = 1;
            if (t->storage) {
                if (t->storage->nbytes % esize) {
                    rc = ckpt_error_set(CKPT_EFORMAT, "%s: storage '%s' of '%s' holds %llu bytes, not whole %s elements",
                                        in->path, t->storage->key, t->name,
                                        (unsigned long long)t->storage->nbytes, ckpt_dtype_name(t->dtype));
                    break;
                }
                whole->shape[0] = (int64_t)(t->storage->nbytes / esize);
            }
            o->blob = p->n_blobs;
            if (t->storage && (rc = ckpt_u64map_set(&blob_of, ckpt_u64map_ptrkey(t->storage), p->n_blobs)) < 0)
                break;
            rc = set_blob(p, p->n_blobs++, whole, o->dtype);
        }
    }
    ckpt_u64map_dispose(&blob_of);
    return rc;
}

static int count_tensor(const ckpt_value *v, const char *path, void *payload)
{
    (void)path;
    if (v->kind == CKPT_VAL_TENSOR)
        ++*(size_t *)payload;
    return 0;
}

/* Top-level entries without tensors are what a tensors-only output drops; say which. */
static size_t note_dropped(const ckpt_value *root, ckpt_convert_report *report)
{
    size_t i, dropped = 0;

    if (!root || root->kind != CKPT_VAL_DICT)
        return root && root->kind != CKPT_VAL_TENSOR;
    for (i = 0; i < root->u.dict.map.n; i++) {
        const ckpt_value *k = root->u.dict.map.keys[i];
        size_t tensors = 0;
        if (ckpt_value_walk(root->u.dict.map.vals[i], 1024, count_tensor, &tensors) < 0 || tensors)
            continue;
        if (report && dropped < 8)
            ckpt_buf_printf(&report->notes, "%s%s", dropped ? ", " : "dropped non-tensor entries: ",
                            k->kind == CKPT_VAL_STR ? k->u.str.ptr : "?");
        else if (report && dropped == 8)
            ckpt_buf_puts(&report->notes, ", ...");
        dropped++;
    }
    if (report && dropped)
        ckpt_buf_puts(&report->notes, " (the output format holds tensors only)\n");
    return dropped;
}

static int check_safety(const ckpt_ckpt *in, const ckpt_convert_options *opts)
{
    size_t i;

    if (opts->unknown != CKPT_UNKNOWN_REFUSE)
        return 0;
    for (i = 0; i < in->n_globals; i++) {
        const ckpt_global_ref *g = &in->globals[i];
        if (g->known)
            continue;
        return ckpt_error_set(CKPT_EUNSAFE,
                              "%s: refusing to convert: the pickle references %s.%s at '%s', which is outside "
                              "the known set and would run code when loaded; --drop-unknown-objects converts "
                              "the tensors only, --keep-unknown-objects carries it through (unsafe for "
                              "whoever loads the output)",
                              in->path, g->module, g->name, *g->path ? g->path : "(root)");
    }
    return 0;
}

int ckpt_convert__format(const char *path, const ckpt_convert_options *opts, const ckpt_format_vtable **out)
{
    const char *format_name = opts->format ? opts->format : ckpt_format_for_path(path);
    const ckpt_format_vtable *format;

    if (!format_name)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT,
                               "%s: cannot tell the output format from the extension; name it (--to)", path);
    format = ckpt_registry__lookup(format_name);
    if (!format)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "unknown output format '%s'", format_name);
    if (!(format->caps & CKPT_FORMAT_WRITE) || !format->write_begin)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT, "format '%s' cannot be written",
                               format->name);
    if (opts->dtype != CKPT_DTYPE_INVALID && !ckpt_dtype_is_float(opts->dtype))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "--dtype must be a floating-point type, not %s",
                               ckpt_dtype_name(opts->dtype));
    *out = format;
    return 0;
}

int ckpt_convert__options(const ckpt_convert_options *user_opts, ckpt_convert_options *out)
{
    ckpt_convert_options defaults = CKPT_CONVERT_OPTIONS_INIT;

    *out = defaults;
    if (!user_opts)
        return 0;
    /* version 1 callers allocated the struct up to progress_payload */
    if (user_opts->version == 1) {
        memcpy(out, user_opts, offsetof(ckpt_convert_options, compress));
        out->version = CKPT_CONVERT_OPTIONS_VERSION;
        return 0;
    }
    if (user_opts->version != CKPT_CONVERT_OPTIONS_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_convert_options version %u, expected %u", user_opts->version,
                              CKPT_CONVERT_OPTIONS_VERSION);
    *out = *user_opts;
    return 0;
}

int ckpt_convert(const ckpt_ckpt *in, const char *out_path, const ckpt_convert_options *user_opts,
                 ckpt_convert_report *report)
{
    ckpt_convert_options opts = CKPT_CONVERT_OPTIONS_INIT;
    const ckpt_format_vtable *format;
    plan p;
    int carry, rc;

    if ((rc = ckpt_convert__options(user_opts, &opts)) < 0)
        return rc;
    if (report)
        memset(report, 0, sizeof *report);
    if ((rc = ckpt_convert__format(out_path, &opts, &format)) < 0)
        return rc;
    rc = check_safety(in, &opts);
    if (rc < 0)
        return rc;

    memset(&p, 0, sizeof p);
    p.tensors = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *p.tensors);
    p.blobs = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *p.blobs);
    p.sources = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *p.sources);
    p.wholes = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *p.wholes);
    if (!p.tensors || !p.blobs || !p.sources || !p.wholes) {
        plan_free(&p);
        return ckpt_error_oom();
    }
    if ((rc = ckpt_graph_new(&p.graph)) < 0) {
        plan_free(&p);
        return rc;
    }
    if (format->caps & CKPT_FORMAT_VIEWS)
        rc = plan_views(&p, in, &opts);
    else
        rc = plan_dense(&p, in, &opts);
    if (rc < 0) {
        plan_free(&p);
        return rc;
    }
    /* a value tree only makes sense in the format it came from (torch objects mean nothing
     * to paddle.load, paddle's name table nothing to a torch state dict) */
    carry = opts.unknown != CKPT_UNKNOWN_DROP && (format->caps & CKPT_FORMAT_METADATA) && format == in->format;
    p.out.root = carry ? in->root : NULL;
    p.out.n_tensors = in->n_tensors;
    p.out.tensors = p.tensors;
    p.out.n_blobs = p.n_blobs;
    p.out.blobs = p.blobs;
    if (!carry) {
        size_t dropped = note_dropped(in->root, report);
        if (report)
            report->dropped_values = dropped;
    }
    rc = ckpt_writer__run(format, &p.out, p.sources, out_path, &opts, report);
    if (rc >= 0 && report)
        report->tensors = in->n_tensors;
    plan_free(&p);
    return rc;
}

void ckpt_convert_report_dispose(ckpt_convert_report *r)
{
    if (r)
        ckpt_buf_dispose(&r->notes);
}
