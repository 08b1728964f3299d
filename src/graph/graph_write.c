/* ckpt_graph_write: named graph nodes into one output file. Each output is one blob in C
 * order; outputs that share a node share a blob where the format keeps shared storages. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

static int check_names(const ckpt_graph_output *outputs, size_t n, const char *path)
{
    ckpt_tensor *tmp = calloc(n ? n : 1, sizeof *tmp);
    ckpt_strmap ix = CKPT_STRMAP_INIT;
    size_t i;
    int rc = 0;

    if (!tmp)
        return ckpt_error_oom();
    for (i = 0; i < n && rc == 0; i++) {
        if (!outputs[i].name || !outputs[i].node)
            rc = ckpt_error_set(CKPT_EINVALID, "%s: output %zu has no name or no node", path, i);
        tmp[i].name = outputs[i].name;
    }
    /* the index refuses duplicate names, naming the tensor */
    if (rc == 0)
        rc = ckpt_names__build(&ix, tmp, n);
    if (rc < 0)
        ckpt_error_prefix("%s", path);
    ckpt_strmap_dispose(&ix);
    free(tmp);
    return rc;
}

int ckpt_graph_write(const ckpt_graph_output *outputs, size_t n, const char *path, const ckpt_convert_options *user_opts,
                     ckpt_convert_report *report)
{
    return ckpt_graph__write(outputs, n, NULL, path, user_opts, report);
}

int ckpt_graph__write(const ckpt_graph_output *outputs, size_t n, const ckpt_value *root, const char *path,
                      const ckpt_convert_options *user_opts, ckpt_convert_report *report)
{
    ckpt_convert_options opts = CKPT_CONVERT_OPTIONS_INIT;
    const ckpt_format_vtable *format;
    ckpt_out_tensor *tensors = NULL;
    ckpt_out_blob *blobs = NULL;
    ckpt_blob_source *sources = NULL;
    ckpt_u64map shared_blobs = CKPT_U64MAP_INIT;
    ckpt_out out;
    size_t i, n_blobs = 0;
    int rc;

    if ((rc = ckpt_convert__options(user_opts, &opts)) < 0)
        return rc;
    if (report)
        memset(report, 0, sizeof *report);
    if ((rc = ckpt_convert__format(path, &opts, &format)) < 0 || (rc = check_names(outputs, n, path)) < 0)
        return rc;
    if (root && !(format->caps & CKPT_FORMAT_METADATA))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: format '%s' holds tensors only, not a value tree", path,
                              format->name);
    tensors = calloc(n ? n : 1, sizeof *tensors);
    blobs = calloc(n ? n : 1, sizeof *blobs);
    sources = calloc(n ? n : 1, sizeof *sources);
    if (!tensors || !blobs || !sources) {
        rc = ckpt_error_oom();
        goto done;
    }
    for (i = 0; i < n; i++) {
        const ckpt_node *node = outputs[i].node;
        ckpt_out_tensor *o = &tensors[i];
        uint64_t shared;
        int64_t stride = 1;
        int d;

        o->name = outputs[i].name;
        o->dtype = ckpt_convert__dtype(ckpt_node_dtype(node), &opts);
        o->ndim = ckpt_node_ndim(node);
        memcpy(o->shape, ckpt_node_shape(node), (size_t)o->ndim * sizeof *o->shape);
        for (d = o->ndim - 1; d >= 0; d--) {
            o->stride[d] = stride;
            stride *= o->shape[d];
        }
        o->flags = outputs[i].flags;
        if ((format->caps & CKPT_FORMAT_VIEWS) &&
            ckpt_u64map_get(&shared_blobs, ckpt_u64map_ptrkey(node), &shared)) {
            o->blob = (size_t)shared;
            continue;
        }
        if ((rc = ckpt_u64map_set(&shared_blobs, ckpt_u64map_ptrkey(node), n_blobs)) < 0)
            goto done;
        o->blob = n_blobs;
        sources[n_blobs].node = node;
        sources[n_blobs].name = o->name;
        blobs[n_blobs].dtype = o->dtype;
        blobs[n_blobs].nbytes = (uint64_t)ckpt_node_numel(node) * ckpt_dtype_size(o->dtype);
        n_blobs++;
    }
    out.root = root;
    out.n_tensors = n;
    out.tensors = tensors;
    out.n_blobs = n_blobs;
    out.blobs = blobs;
    rc = ckpt_writer__run(format, &out, sources, path, &opts, report);
    if (rc >= 0 && report)
        report->tensors = n;
done:
    ckpt_u64map_dispose(&shared_blobs);
    free(tensors);
    free(blobs);
    free(sources);
    return rc;
}
