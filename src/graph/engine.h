/* Engine internals shared by the files of src/graph: the checkpoint object behind
 * ckpt_reader, the format registry, and the writer that executes placements. */
#ifndef CKPT_ENGINE_H
#define CKPT_ENGINE_H

#ifndef CKPT_BUILD
#error "engine.h is private to the ckpt library"
#endif

#include <ckpt/checkpoint.h>
#include <ckpt/graph.h>
#include <ckpt/plan.h>
#include <ckpt/sys/format.h>
#include <ckpt/sys/registry.h>
#include <ckpt/sys/table.h>

struct ckpt_reader {
    ckpt_ckpt *ckpt;
};

struct ckpt_ckpt {
    struct ckpt_reader reader;
    char *path;
    const ckpt_format_vtable *format;
    ckpt_open_options opts;
    ckpt_arena *arena;
    ckpt_file **files;
    size_t n_files;
    ckpt_tensor *tensors;
    size_t n_tensors, cap_tensors;
    ckpt_value *root;
    char **notes;
    size_t n_notes;
    ckpt_global_ref *globals;
    size_t n_globals;
    ckpt_strmap names; /* tensor name -> index into tensors */
    void *state; /* the format's */
    /* checkpoints opened over items of this one (ckpt_open_item), closed with it */
    struct ckpt_item {
        const ckpt_value *item;
        struct ckpt_ckpt *ck;
    } *items;
    size_t n_items;
    int borrowed; /* files[0] is a window on another checkpoint's file: not closed here */
};

/* The tensors a plan leaves out (plan_drop.c): the plan holds the pointer, freed with it. */
typedef struct plan_drops plan_drops;
plan_drops **ckpt_plan__drops(ckpt_plan *p);
void ckpt_plan__drops_free(plan_drops *d);

/* What a compressed input of checkpoint `arg` (a ckpt_ckpt) may be, judged on its first
 * decompressed bytes (a ckpt_zstd_check's fn, src/io/zstd_io.h): the main file must be one
 * that some format bids on, and a file the format opens is held to that format's bound
 * (src/graph/checkpoint.c). */
int ckpt_ckpt__zstd_check(void *arg, const char *path, const uint8_t *head, size_t n, int whole, uint64_t *need,
                          uint64_t *max_size);

/* Name index over a tensor table (src/graph/names.c): tensor names -> their index. A name
 * given twice is CKPT_EFORMAT; ckpt_strmap_dispose releases the index. */
int ckpt_names__build(ckpt_strmap *ix, const ckpt_tensor *tensors, size_t n);
long ckpt_names__find(const ckpt_strmap *ix, const char *name);

/* What the engine writes for each blob: the C-order elements of `node`, converted to the
 * blob's dtype. `name` is for error messages. */
typedef struct ckpt_blob_source {
    const ckpt_node *node;
    const char *name;
} ckpt_blob_source;

/* The caller's options (NULL: the defaults) as the current version: version 1 structs are
 * read up to the fields they have (src/graph/convert.c). */
int ckpt_convert__options(const ckpt_convert_options *user_opts, ckpt_convert_options *out);
/* The output format named by opts->format or by path's extension, checked for writing;
 * opts->dtype checked too (src/graph/convert.c). */
int ckpt_convert__format(const char *path, const ckpt_convert_options *opts, const ckpt_format_vtable **out);
/* opts->dtype applied to a tensor of type `in`. */
ckpt_dtype ckpt_convert__dtype(ckpt_dtype in, const ckpt_convert_options *opts);

/* Write `out` to `path` with `format` (src/graph/writer.c). sources[i] produces blob i. */
int ckpt_writer__run(const ckpt_format_vtable *format, const ckpt_out *out, const ckpt_blob_source *sources,
                     const char *path, const ckpt_convert_options *opts, ckpt_convert_report *report);

/* The bytes of a placement of `len` bytes of `node` (in `dtype`) that the writer moves in one
 * step: `chunk`, or, where the node transposes its input, a page band
 * (ckpt_node__page_band): a shorter step reads a thin slice of every source line, and the
 * next step maps the same pages again, once per step for every page. The band is bounded by
 * `cap`; where it does not fit, the longest step that does, which maps each page that many
 * times fewer. */
uint64_t ckpt_writer__step(const ckpt_node *node, ckpt_dtype dtype, uint64_t len, uint64_t chunk, uint64_t cap,
                           uint64_t page);

/* ckpt_graph_write with a value tree for formats that carry one (CKPT_FORMAT_METADATA):
 * its TENSOR leaves index `outputs` (src/graph/graph_write.c). */
int ckpt_graph__write(const ckpt_graph_output *outputs, size_t n, const ckpt_value *root, const char *path,
                      const ckpt_convert_options *opts, ckpt_convert_report *report);

#endif
