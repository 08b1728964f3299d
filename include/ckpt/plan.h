/* A plan over many output files: everything a job will write, decided before the first
 * byte is written, then executed in one go into an output directory that appears whole or
 * not at all.
 *
 * Each tensor file of the plan is a format, named tensors (graph nodes) and, for formats
 * that carry one, a value tree (args, iteration, rng state, optimizer state) whose TENSOR
 * leaves index the file's tensors in the order they were added. Small files (a tracker, an
 * index json, a config.json) are bytes given up front; other files are copied from a path.
 * The plan is printable (--dry-run) and is the unit a multi-process run will split across
 * ranks: files are independent of each other.
 *
 * The plan owns its graph and an arena for value trees and strings; inputs that its nodes
 * and trees refer to (checkpoints, sets) must stay open until the plan is freed. */
#ifndef CKPT_PLAN_H
#define CKPT_PLAN_H

#include "graph.h"

CKPT_BEGIN_DECL

typedef struct ckpt_plan ckpt_plan;

CKPT_EXTERN(int) ckpt_plan_new(ckpt_plan **out);
CKPT_EXTERN(void) ckpt_plan_free(ckpt_plan *p);

/* The graph the plan's nodes are built in, and the arena its value trees are built in;
 * both live as long as the plan. */
CKPT_EXTERN(ckpt_graph *) ckpt_plan_graph(ckpt_plan *p);
CKPT_EXTERN(ckpt_arena *) ckpt_plan_arena(ckpt_plan *p);

/* A tensor file at `rel` (a relative path, "iter_0000010/mp_rank_00/model_optim_rng.pt") in
 * `format` (a name, alias or extension; NULL: from rel's extension). *index is the file's
 * number. Two files with one path are an error. */
CKPT_EXTERN(int) ckpt_plan_add_file(ckpt_plan *p, const char *rel, const char *format, size_t *index);
/* Add a named tensor to a file; *tensor (if non-NULL) is its index in that file, which the
 * file's value tree uses. Tensors that share one node share one storage where the format
 * can. The name is copied. */
CKPT_EXTERN(int) ckpt_plan_add_tensor(ckpt_plan *p, size_t file, const char *name, const ckpt_node *node,
                                      uint32_t flags, size_t *tensor);
/* The file's value tree (built in ckpt_plan_arena, or borrowed from an input that outlives
 * the plan). Formats without CKPT_FORMAT_METADATA refuse a tree. */
CKPT_EXTERN(int) ckpt_plan_set_root(ckpt_plan *p, size_t file, const ckpt_value *root);
/* A file holding exactly these bytes (copied). */
CKPT_EXTERN(int) ckpt_plan_add_bytes(ckpt_plan *p, const char *rel, const void *data, size_t len);
/* A file copied byte for byte from src_path. */
CKPT_EXTERN(int) ckpt_plan_add_copy(ckpt_plan *p, const char *rel, const char *src_path);

/* What is in the plan, for reports. Kinds: */
#define CKPT_PLAN_TENSORS 0 /* a tensor file */
#define CKPT_PLAN_BYTES   1
#define CKPT_PLAN_COPY    2

typedef struct ckpt_plan_file {
    const char *rel;
    int kind;              /* CKPT_PLAN_* */
    const char *format;    /* tensor files: the canonical format name */
    size_t n_tensors;
    uint64_t tensor_bytes; /* tensor data (shared storages counted once); for the others, the file size */
    const char *source;    /* CKPT_PLAN_COPY: the path copied */
} ckpt_plan_file;

CKPT_EXTERN(size_t) ckpt_plan_file_count(const ckpt_plan *p);
CKPT_EXTERN(const ckpt_plan_file *) ckpt_plan_file_at(const ckpt_plan *p, size_t i);
/* Tensor i of file f: its name, node and flags (NULL when out of range). */
CKPT_EXTERN(const char *) ckpt_plan_tensor_at(const ckpt_plan *p, size_t f, size_t i, const ckpt_node **node,
                                              uint32_t *flags);
/* Sum of tensor_bytes over the plan. */
CKPT_EXTERN(uint64_t) ckpt_plan_total_bytes(const ckpt_plan *p);

/* Every file with its tensors, one line each, as --dry-run prints it: "<rel> (<format>, n
 * tensors, size)" then "  <name> <dtype> [shape] <- <how the node is computed>". */
CKPT_EXTERN(int) ckpt_plan_describe(const ckpt_plan *p, int with_tensors, ckpt_buf *out);

/* ---- input tensors a job leaves out ----
 * A job writes every input tensor one of its rules takes. One that no rule takes is an
 * error naming it, unless a rule the job documents drops it (a buffer the target recomputes,
 * such as RoPE's inv_freq) or a --drop pattern asks for the loss. Either way the plan keeps
 * the name and the reason, for the report. */

/* A --drop pattern: a glob over the whole tensor name ('*', '?' and [...] as in the shell;
 * '*' crosses dots). */
CKPT_EXTERN(int) ckpt_plan_drop_pattern(ckpt_plan *p, const char *pattern);
/* Whether input tensor `name` is left out: with `rule` (the job's documented reason) it is;
 * otherwise when a --drop pattern matches it. 1: left out and recorded, 0: kept, or an error. */
CKPT_EXTERN(int) ckpt_plan_leave_out(ckpt_plan *p, const char *name, const char *rule);
/* The error for input tensors names[0..n) that no rule of `job` takes (where: the input);
 * 0 when n is 0. */
CKPT_EXTERN(int) ckpt_plan_refuse_untaken(const char *where, const char *job, const char *const *names, size_t n);
/* The same for the outputs of a map that no rule made (tensors it passed through). */
struct ckpt_map_result;
CKPT_EXTERN(int) ckpt_plan_check_taken(const char *where, const char *job, const struct ckpt_map_result *r);
/* Every --drop pattern matched a tensor; else an error naming the one that did not (a typo
 * must not pass silently). */
CKPT_EXTERN(int) ckpt_plan_check_drop_patterns(const ckpt_plan *p);
/* What was left out, in order: the name, and *reason (the rule, or "--drop PATTERN"). */
CKPT_EXTERN(size_t) ckpt_plan_dropped_count(const ckpt_plan *p);
CKPT_EXTERN(const char *) ckpt_plan_dropped_at(const ckpt_plan *p, size_t i, const char **reason);

/* A note on output file `rel` for whoever reads the report (what it takes from defaults):
 * the report of ckpt_plan_execute carries it as "<rel>: <note>", ckpt_plan_json lists it
 * (notes). ckpt_plan_notes: all of them, a line each ("" for none). */
CKPT_EXTERN(int) ckpt_plan_note(ckpt_plan *p, const char *rel, const char *note);
CKPT_EXTERN(const char *) ckpt_plan_notes(const ckpt_plan *p);

typedef struct ckpt_plan_options {
    unsigned version;
    int force;              /* write into an existing non-empty directory (ckpt_outdir_begin) */
    ckpt_convert_options convert; /* per tensor file: dtype, memory, threads, protocol, unknown policy;
                                     its format and overwrite fields are ignored */
} ckpt_plan_options;

#define CKPT_PLAN_OPTIONS_VERSION 1
#define CKPT_PLAN_OPTIONS_INIT { CKPT_PLAN_OPTIONS_VERSION, 0, CKPT_CONVERT_OPTIONS_INIT }

typedef struct ckpt_plan_report {
    size_t files;
    size_t tensors;
    uint64_t bytes_written; /* sum of the output file sizes */
    ckpt_buf notes;         /* the writers' notes, "<rel>: <note>" per line */
    uint64_t *file_bytes;   /* each file's size as written, in plan order (0: not written) */
} ckpt_plan_report;

/* Write every file of the plan under out_dir, which is built beside its final name and
 * moved into place at the end (ckpt_outdir): on failure nothing is left. Progress (the
 * convert options' callback) counts tensor bytes over the whole plan. A non-NULL report is
 * filled in either way; release it with ckpt_plan_report_dispose. */
CKPT_EXTERN(int) ckpt_plan_execute(const ckpt_plan *p, const char *out_dir, const ckpt_plan_options *opts,
                                   ckpt_plan_report *report);
CKPT_EXTERN(void) ckpt_plan_report_dispose(ckpt_plan_report *r);

/* The plan as one JSON object (appended to out), the keys every job's report shares:
 *   dry_run        true when `written` is NULL (nothing was written)
 *   files          [{path, kind ("tensors", "bytes" or "copy"), format (tensor files),
 *                    tensors, bytes (tensor data; the size of other files),
 *                    bytes_written (after a run)}], in plan order
 *   tensors, bytes  their sums
 *   dropped        [{name, reason}]: the input tensors left out (ckpt_plan_leave_out)
 *   notes          ["<rel>: <note>"] (ckpt_plan_note), only when there are some
 *   bytes_written  after a run: the sum of the output file sizes */
CKPT_EXTERN(int) ckpt_plan_json(const ckpt_plan *p, const ckpt_plan_report *written, ckpt_buf *out);

CKPT_END_DECL

#endif
