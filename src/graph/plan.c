/* Plans over many output files, and their executor: every file is written through the same
 * writer as ckpt_graph_write, one after the other (each one in parallel across its tensors),
 * into a staging directory that is moved into place only when all of them are written. */
#include "engine.h"

#include <ckpt/outdir.h>
#include <ckpt/plan.h>
#include <ckpt/sys/common.h>
#include <ckpt/sys/io.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

typedef struct plan_tensor {
    const char *name; /* in the plan's arena */
    const ckpt_node *node;
    uint32_t flags;
} plan_tensor;

typedef struct plan_entry {
    ckpt_plan_file info;
    plan_tensor *tensors;
    size_t cap_tensors;
    ckpt_u64map nodes; /* node -> 1, so that shared storages count once in tensor_bytes */
    const ckpt_value *root;
    const uint8_t *bytes;
} plan_entry;

struct ckpt_plan {
    ckpt_graph *graph;
    ckpt_arena *arena;
    plan_entry *files;
    size_t n_files, cap_files;
    plan_drops *drops;
    ckpt_buf notes; /* ckpt_plan_note's, "<rel>: <note>\n" each */
};

int ckpt_plan_new(ckpt_plan **out)
{
    ckpt_plan *p = calloc(1, sizeof *p);
    int rc;

    *out = NULL;
    if (!p)
        return ckpt_error_oom();
    if ((rc = ckpt_graph_new(&p->graph)) < 0 || (rc = ckpt_arena_new(&p->arena)) < 0) {
        ckpt_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void ckpt_plan_free(ckpt_plan *p)
{
    size_t i;

    if (!p)
        return;
    for (i = 0; i < p->n_files; i++) {
        free(p->files[i].tensors);
        ckpt_u64map_dispose(&p->files[i].nodes);
    }
    free(p->files);
    ckpt_plan__drops_free(p->drops);
    ckpt_buf_dispose(&p->notes);
    ckpt_graph_free(p->graph);
    ckpt_arena_free(p->arena);
    free(p);
}

int ckpt_plan_note(ckpt_plan *p, const char *rel, const char *note)
{
    return ckpt_buf_printf(&p->notes, "%s: %s\n", rel, note);
}

const char *ckpt_plan_notes(const ckpt_plan *p)
{
    return p->notes.len ? (const char *)p->notes.data : "";
}

plan_drops **ckpt_plan__drops(ckpt_plan *p)
{
    return &p->drops;
}

ckpt_graph *ckpt_plan_graph(ckpt_plan *p)
{
    return p->graph;
}

ckpt_arena *ckpt_plan_arena(ckpt_plan *p)
{
    return p->arena;
}

static int check_rel(const ckpt_plan *p, const char *rel)
{
    size_t i;

    if (!rel || !*rel || rel[0] == '/')
        return ckpt_error_set(CKPT_EINVALID, "plan: output path '%s' is not a relative path", rel ? rel : "");
    for (i = 0; i < p->n_files; i++)
        if (strcmp(p->files[i].info.rel, rel) == 0)
            return ckpt_error_set(CKPT_EINVALID, "plan: two output files at '%s'", rel);
    return 0;
}

static int new_entry(ckpt_plan *p, const char *rel, int kind, plan_entry **out)
{
    plan_entry *e;
    int rc;

    if ((rc = check_rel(p, rel)) < 0)
        return rc;
    if (p->n_files == p->cap_files) {
        size_t cap = p->cap_files ? 2 * p->cap_files : 16;
        plan_entry *files = realloc(p->files, cap * sizeof *files);
        if (!files)
            return ckpt_error_oom();
        p->files = files;
        p->cap_files = cap;
    }
    e = &p->files[p->n_files];
    memset(e, 0, sizeof *e);
    e->info.kind = kind;
    e->info.rel = ckpt_arena_strndup(p->arena, rel, strlen(rel));
    if (!e->info.rel)
        return CKPT_ENOMEM;
    p->n_files++;
    *out = e;
    return 0;
}

int ckpt_plan_add_file(ckpt_plan *p, const char *rel, const char *format, size_t *index)
{
    const char *name = format ? ckpt_format_find(format) : ckpt_format_for_path(rel ? rel : "");
    const ckpt_format_vtable *vt = name ? ckpt_registry__find(name) : NULL;
    plan_entry *e;
    int rc;

    if (!vt)
        return format ? ckpt_error_set(CKPT_EINVALID, "plan: %s: unknown format '%s'", rel ? rel : "", format)
                      : ckpt_error_set(CKPT_EINVALID, "plan: cannot tell the format of '%s' from its extension",
                                       rel ? rel : "");
    if (!(vt->caps & CKPT_FORMAT_WRITE))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "plan: %s: format '%s' cannot be written", rel, vt->name);
    if ((rc = new_entry(p, rel, CKPT_PLAN_TENSORS, &e)) < 0)
        return rc;
    e->info.format = vt->name;
    *index = p->n_files - 1;
    return 0;
}

int ckpt_plan_add_tensor(ckpt_plan *p, size_t file, const char *name, const ckpt_node *node, uint32_t flags,
                         size_t *tensor)
{
    plan_entry *e;
    plan_tensor *t;
    int rc;

    if (file >= p->n_files || p->files[file].info.kind != CKPT_PLAN_TENSORS || !name || !node)
        return ckpt_error_set(CKPT_EINVALID, "plan: tensor '%s' added to no tensor file", name ? name : "");
    e = &p->files[file];
    if (e->info.n_tensors == e->cap_tensors) {
        size_t cap = e->cap_tensors ? 2 * e->cap_tensors : 64;
        plan_tensor *ts = realloc(e->tensors, cap * sizeof *ts);
        if (!ts)
            return ckpt_error_oom();
        e->tensors = ts;
        e->cap_tensors = cap;
    }
    t = &e->tensors[e->info.n_tensors];
    t->name = ckpt_arena_strndup(p->arena, name, strlen(name));
    if (!t->name)
        return CKPT_ENOMEM;
    t->node = node;
    t->flags = flags;
    if (!ckpt_u64map_get(&e->nodes, ckpt_u64map_ptrkey(node), NULL)) {
        if ((rc = ckpt_u64map_set(&e->nodes, ckpt_u64map_ptrkey(node), 1)) < 0)
            return rc;
        e->info.tensor_bytes += (uint64_t)ckpt_node_numel(node) * ckpt_dtype_size(ckpt_node_dtype(node));
    }
    if (tensor)
        *tensor = e->info.n_tensors;
    e->info.n_tensors++;
    return 0;
}

int ckpt_plan_set_root(ckpt_plan *p, size_t file, const ckpt_value *root)
{
    const ckpt_format_vtable *vt;

    if (file >= p->n_files || p->files[file].info.kind != CKPT_PLAN_TENSORS)
        return ckpt_error_set(CKPT_EINVALID, "plan: value tree for no tensor file");
    vt = ckpt_registry__find(p->files[file].info.format);
    if (!(vt->caps & CKPT_FORMAT_METADATA))
        return ckpt_error_set(CKPT_EUNSUPPORTED, "plan: %s: format '%s' holds tensors only, not a value tree",
                              p->files[file].info.rel, vt->name);
    p->files[file].root = root;
    return 0;
}

int ckpt_plan_add_bytes(ckpt_plan *p, const char *rel, const void *data, size_t len)
{
    plan_entry *e;
    uint8_t *copy = ckpt_arena_alloc(p->arena, len ? len : 1);
    int rc;

    if (!copy)
        return CKPT_ENOMEM;
    if ((rc = new_entry(p, rel, CKPT_PLAN_BYTES, &e)) < 0)
        return rc;
    if (len)
        memcpy(copy, data, len);
    e->bytes = copy;
    e->info.tensor_bytes = len;
    return 0;
}

int ckpt_plan_add_copy(ckpt_plan *p, const char *rel, const char *src_path)
{
    ckpt_file *src;
    plan_entry *e;
    int rc;

    /* opened now so that a missing source fails the plan, not the run */
    if ((rc = ckpt_file_open(&src, src_path)) < 0)
        return rc;
    e = NULL;
    if ((rc = new_entry(p, rel, CKPT_PLAN_COPY, &e)) == 0) {
        e->info.tensor_bytes = src->size;
        e->info.source = ckpt_arena_strndup(p->arena, src_path, strlen(src_path));
        if (!e->info.source)
            rc = CKPT_ENOMEM;
    }
    ckpt_file_close(src);
    return rc;
}

size_t ckpt_plan_file_count(const ckpt_plan *p)
{
    return p->n_files;
}

const ckpt_plan_file *ckpt_plan_file_at(const ckpt_plan *p, size_t i)
{
    return i < p->n_files ? &p->files[i].info : NULL;
}

const char *ckpt_plan_tensor_at(const ckpt_plan *p, size_t f, size_t i, const ckpt_node **node, uint32_t *flags)
{
    const plan_tensor *t;

    if (f >= p->n_files || i >= p->files[f].info.n_tensors)
        return NULL;
    t = &p->files[f].tensors[i];
    if (node)
        *node = t->node;
    if (flags)
        *flags = t->flags;
    return t->name;
}

uint64_t ckpt_plan_total_bytes(const ckpt_plan *p)
{
    uint64_t total = 0;
    size_t i;

    for (i = 0; i < p->n_files; i++)
        total += p->files[i].info.tensor_bytes;
    return total;
}

static void describe_shape(const ckpt_node *x, ckpt_buf *out)
{
    const int64_t *shape = ckpt_node_shape(x);
    int d, n = ckpt_node_ndim(x);

    ckpt_buf_putc(out, '[');
    for (d = 0; d < n; d++)
        ckpt_buf_printf(out, "%s%lld", d ? ", " : "", (long long)shape[d]);
    ckpt_buf_putc(out, ']');
}

int ckpt_plan_describe(const ckpt_plan *p, int with_tensors, ckpt_buf *out)
{
    size_t i, j;
    int rc = 0;

    for (i = 0; i < p->n_files && rc == 0; i++) {
        const plan_entry *e = &p->files[i];
        switch (e->info.kind) {
        case CKPT_PLAN_TENSORS:
            rc = ckpt_buf_printf(out, "%s (%s, %zu tensors, %llu bytes of tensor data)\n", e->info.rel, e->info.format,
                                 e->info.n_tensors, (unsigned long long)e->info.tensor_bytes);
            break;
        case CKPT_PLAN_BYTES:
            rc = ckpt_buf_printf(out, "%s (%llu bytes)\n", e->info.rel, (unsigned long long)e->info.tensor_bytes);
            break;
        default:
            rc = ckpt_buf_printf(out, "%s (copy of %s, %llu bytes)\n", e->info.rel, e->info.source,
                                 (unsigned long long)e->info.tensor_bytes);
        }
        for (j = 0; with_tensors && rc == 0 && j < e->info.n_tensors; j++) {
            const plan_tensor *t = &e->tensors[j];
            ckpt_buf_printf(out, "  %s %s ", t->name, ckpt_dtype_name(ckpt_node_dtype(t->node)));
            describe_shape(t->node, out);
            ckpt_buf_puts(out, " <- ");
            rc = ckpt_node_describe(t->node, out);
            if (rc == 0)
                rc = ckpt_buf_putc(out, '\n');
        }
    }
    return rc;
}

/* Progress over the whole plan from each file's own progress; files may be written at the
 * same time, so the sum is kept atomically and the user's callback is called by one thread
 * at a time. */
typedef struct plan_progress {
    const ckpt_convert_options *user;
    uint64_t done, total;
} plan_progress;

typedef struct file_progress_state {
    plan_progress *plan;
    uint64_t last; /* this file's bytes counted so far */
} file_progress_state;

static void add_progress(plan_progress *pp, uint64_t n)
{
    uint64_t done = __atomic_add_fetch(&pp->done, n, __ATOMIC_RELAXED);

    if (!pp->user->progress)
        return;
#ifdef CKPT_HAVE_OPENMP
#pragma omp critical(ckpt_plan_progress)
#endif
    pp->user->progress(done, pp->total, pp->user->progress_payload);
}

static void file_progress(uint64_t done, uint64_t total, void *payload)
{
    file_progress_state *fp = payload;
    (void)total;
    if (done > fp->last) {
        add_progress(fp->plan, done - fp->last);
        fp->last = done;
    }
}

/* What writing one file gave: filled by the thread that wrote it, gathered in plan order. */
typedef struct file_result {
    int rc, klass;
    char message[1024];
    size_t tensors;
    uint64_t bytes;
    ckpt_buf notes;
} file_result;

static void result_fail(file_result *r, int rc)
{
    r->rc = rc;
    r->klass = ckpt_error_last()->klass;
    snprintf(r->message, sizeof r->message, "%s", ckpt_error_last()->message);
}

static int write_tensors(const plan_entry *e, const char *path, const ckpt_convert_options *o, plan_progress *pp,
                         file_result *res)
{
    ckpt_convert_options copts = *o;
    ckpt_convert_report rep;
    file_progress_state fp = { pp, 0 };
    ckpt_graph_output *outs = calloc(e->info.n_tensors ? e->info.n_tensors : 1, sizeof *outs);
    size_t i;
    int rc;

    if (!outs)
        return ckpt_error_oom();
    for (i = 0; i < e->info.n_tensors; i++) {
        outs[i].name = e->tensors[i].name;
        outs[i].node = e->tensors[i].node;
        outs[i].flags = e->tensors[i].flags;
    }
    copts.format = e->info.format;
    copts.overwrite = 0;
    copts.progress = file_progress;
    copts.progress_payload = &fp;
    rc = ckpt_graph__write(outs, e->info.n_tensors, e->root, path, &copts, &rep);
    if (rep.notes.len)
        ckpt_buf_printf(&res->notes, "%s: %s", e->info.rel, (const char *)rep.notes.data);
    if (rc >= 0) {
        res->tensors = rep.tensors;
        res->bytes = rep.bytes_written;
        if (e->info.tensor_bytes > fp.last)
            add_progress(pp, e->info.tensor_bytes - fp.last);
    } else {
        ckpt_error_prefix("%s", e->info.rel);
    }
    ckpt_convert_report_dispose(&rep);
    free(outs);
    return rc;
}

static int write_other(const plan_entry *e, const char *path, plan_progress *pp, file_result *res)
{
    ckpt_outfile *dst = NULL;
    ckpt_file *src = NULL;
    int rc = ckpt_outfile_open(&dst, path, 0);

    if (rc == 0 && e->info.kind == CKPT_PLAN_BYTES && e->info.tensor_bytes)
        rc = ckpt_outfile_pwrite(dst, 0, e->bytes, (size_t)e->info.tensor_bytes);
    if (rc == 0 && e->info.kind == CKPT_PLAN_COPY && (rc = ckpt_file_open(&src, e->info.source)) == 0 && src->size)
        rc = ckpt_outfile_copy(dst, 0, src, 0, src->size);
    if (rc == 0) {
        res->bytes = src ? src->size : e->info.tensor_bytes;
        rc = ckpt_outfile_commit(dst);
        dst = NULL;
        add_progress(pp, e->info.tensor_bytes);
    }
    ckpt_outfile_abort(dst);
    ckpt_file_close(src);
    return rc;
}

static void write_file(const plan_entry *e, const char *path, const ckpt_convert_options *o, plan_progress *pp,
                       file_result *res)
{
    int rc = e->info.kind == CKPT_PLAN_TENSORS ? write_tensors(e, path, o, pp, res) : write_other(e, path, pp, res);
    if (rc < 0)
        result_fail(res, rc);
}

static int thread_count(const ckpt_convert_options *o)
{
#ifdef CKPT_HAVE_OPENMP
    return o->threads > 0 ? o->threads : omp_get_max_threads();
#else
    (void)o;
    return 1;
#endif
}

/* Write every file. With at least as many files as threads, files are written side by side,
 * each by one thread within its share of the memory budget: threads writing one file contend
 * for its inode lock in the kernel, threads writing different files do not. Otherwise the
 * files are written one after the other, each by all threads. */
static void write_files(const ckpt_plan *p, const char *const *paths, const ckpt_convert_options *o,
                        plan_progress *pp, file_result *results)
{
    int threads = thread_count(o);
    size_t i;

    if (threads > 1 && p->n_files >= (size_t)threads) {
        ckpt_convert_options each = *o;
        long n = (long)p->n_files, k;
        each.threads = 1;
        each.memory = (o->memory ? o->memory : 512ull << 20) / (uint64_t)threads;
#ifdef CKPT_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
#endif
        for (k = 0; k < n; k++)
            write_file(&p->files[k], paths[k], &each, pp, &results[k]);
        return;
    }
    for (i = 0; i < p->n_files; i++) {
        write_file(&p->files[i], paths[i], o, pp, &results[i]);
        if (results[i].rc < 0)
            return;
    }
}

int ckpt_plan_execute(const ckpt_plan *p, const char *out_dir, const ckpt_plan_options *user_opts,
                      ckpt_plan_report *report)
{
    ckpt_plan_options opts = CKPT_PLAN_OPTIONS_INIT;
    ckpt_plan_report local;
    plan_progress pp;
    ckpt_outdir *od = NULL;
    const char **paths = NULL;
    file_result *results = NULL;
    size_t i;
    int rc = 0;

    if (user_opts) {
        if (user_opts->version != CKPT_PLAN_OPTIONS_VERSION)
            return ckpt_error_set(CKPT_EINVALID, "ckpt_plan_options version %u, expected %u", user_opts->version,
                                  CKPT_PLAN_OPTIONS_VERSION);
        opts = *user_opts;
    }
    if (!report)
        report = &local;
    memset(report, 0, sizeof *report);
    pp.user = &opts.convert;
    pp.done = 0;
    pp.total = ckpt_plan_total_bytes(p);
    report->file_bytes = calloc(p->n_files + 1, sizeof *report->file_bytes);
    paths = calloc(p->n_files + 1, sizeof *paths);
    results = calloc(p->n_files + 1, sizeof *results);
    if (!report->file_bytes || !paths || !results) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = ckpt_outdir_begin(&od, out_dir, opts.force)) < 0)
        goto done;
    ckpt_buf_puts(&report->notes, ckpt_outdir_notes(od));
    ckpt_buf_puts(&report->notes, ckpt_plan_notes(p));
    /* every path first: making directories in the staging tree is not for several threads */
    for (i = 0; i < p->n_files && rc == 0; i++)
        if (!(paths[i] = ckpt_outdir_file(od, p->files[i].info.rel)))
            rc = ckpt_error_last()->code;
    if (rc == 0)
        write_files(p, paths, &opts.convert, &pp, results);
    for (i = 0; i < p->n_files && rc == 0; i++) {
        const file_result *r = &results[i];
        if (r->notes.len)
            ckpt_buf_puts(&report->notes, (const char *)r->notes.data);
        if (r->rc < 0) {
            rc = ckpt_error_setc(r->rc, r->klass, "%s", r->message);
            break;
        }
        report->file_bytes[i] = r->bytes;
        report->bytes_written += r->bytes;
        report->tensors += r->tensors;
        report->files++;
    }
    if (rc == 0) {
        rc = ckpt_outdir_commit(od);
        od = NULL;
    }
done:
    ckpt_outdir_abort(od);
    for (i = 0; results && i < p->n_files; i++)
        ckpt_buf_dispose(&results[i].notes);
    free(results);
    free(paths);
    if (report == &local)
        ckpt_plan_report_dispose(&local);
    return rc < 0 ? rc : 0;
}

void ckpt_plan_report_dispose(ckpt_plan_report *r)
{
    if (!r)
        return;
    ckpt_buf_dispose(&r->notes);
    free(r->file_bytes);
    r->file_bytes = NULL;
}
