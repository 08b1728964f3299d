/* Opening a checkpoint: map it, let every format bid, hand it to the winner, then name,
 * validate and index what the format found. */
#include "engine.h"
#include "../io/inputs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Deeper than the pickle reader allows, so any tree it built can be walked. */
#define CKPT_MAX_TREE_DEPTH 1024

static int ckpt_alloc(ckpt_ckpt **out, const char *path, const ckpt_open_options *opts)
{
    ckpt_ckpt *c = calloc(1, sizeof *c);
    int rc;

    if (!c)
        return ckpt_error_oom();
    c->reader.ckpt = c;
    c->path = strdup(path);
    if (!c->path) {
        free(c);
        return ckpt_error_oom();
    }
    c->opts = (ckpt_open_options)CKPT_OPEN_OPTIONS_INIT;
    if (opts && opts->version == 1) {
        /* a version-1 caller's struct ends before tag */
        c->opts.format = opts->format;
        c->opts.verify_crc = opts->verify_crc;
    } else if (opts) {
        c->opts = *opts;
    }
    rc = ckpt_arena_new(&c->arena);
    if (rc < 0) {
        free(c->path);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void ckpt_close(ckpt_ckpt *c)
{
    size_t i;

    if (!c)
        return;
    /* they read this one's mapping */
    for (i = 0; i < c->n_items; i++)
        ckpt_close(c->items[i].ck);
    free(c->items);
    if (c->format && c->format->close)
        c->format->close(&c->reader);
    for (i = c->borrowed ? 1 : 0; i < c->n_files; i++)
        ckpt_file_close(c->files[i]);
    ckpt_inputs__release(c);
    free(c->files);
    free(c->tensors);
    free(c->notes);
    free(c->globals);
    ckpt_strmap_dispose(&c->names);
    ckpt_arena_free(c->arena);
    free(c->path);
    free(c);
}

static int choose_format(const ckpt_ckpt *c, const ckpt_probe *probe, const ckpt_format_vtable **out)
{
    const ckpt_format_vtable *best = NULL;
    int best_bid = 0;
    size_t i;

    if (c->opts.format) {
        best = ckpt_registry__lookup(c->opts.format);
        if (!best)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "unknown format '%s'", c->opts.format);
        if (!(best->caps & CKPT_FORMAT_READ) || !best->open)
            return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT, "format '%s' cannot be read",
                                   best->name);
        *out = best;
        return 0;
    }
    for (i = 0; i < ckpt_registry__count(); i++) {
        const ckpt_format_vtable *f = ckpt_registry__at(i);
        int bid;
        if (f->abi_version != CKPT_FORMAT_ABI_VERSION || !(f->caps & CKPT_FORMAT_READ) || !f->bid)
            continue;
        bid = f->bid(probe, best_bid);
        if (bid > best_bid) {
            best_bid = bid;
            best = f;
        }
    }
    if (!best)
        return ckpt_error_set(CKPT_EFORMAT, "%s: unrecognized checkpoint format", c->path);
    *out = best;
    return 0;
}

typedef struct naming {
    ckpt_ckpt *c;
} naming;

static int name_tensor(const ckpt_value *v, const char *path, void *payload)
{
    ckpt_ckpt *c = ((naming *)payload)->c;
    ckpt_tensor *t;

    if (v->kind != CKPT_VAL_TENSOR || v->u.tensor.index >= c->n_tensors)
        return 0;
    t = &c->tensors[v->u.tensor.index];
    if (t->name)
        return 0;
    t->name = ckpt_arena_strndup(c->arena, *path ? path : "tensor", strlen(*path ? path : "tensor"));
    return t->name ? 0 : CKPT_ENOMEM;
}

static int name_tensors(ckpt_ckpt *c)
{
    naming n = { c };
    size_t i;
    int rc;

    if (c->root) {
        rc = ckpt_value_walk(c->root, CKPT_MAX_TREE_DEPTH, name_tensor, &n);
        if (rc)
            return rc < 0 ? rc : ckpt_error_oom();
    }
    for (i = 0; i < c->n_tensors; i++) {
        char name[32];
        if (c->tensors[i].name)
            continue;
        snprintf(name, sizeof name, "tensor.%zu", i);
        c->tensors[i].name = ckpt_arena_strndup(c->arena, name, strlen(name));
        if (!c->tensors[i].name)
            return CKPT_ENOMEM;
    }
    return 0;
}

/* Distinct globals, first occurrence first, deduplicated by "module\0name". */
typedef struct global_set {
    ckpt_ckpt *c;
    ckpt_strmap index; /* key in c->arena -> index into c->globals */
    char *key;         /* the key looked up, copied to the arena when new */
    size_t key_cap;
} global_set;

static int collect_global(const ckpt_value *v, const char *path, void *payload)
{
    global_set *gs = payload;
    ckpt_ckpt *c = gs->c;
    ckpt_global_ref *globals;
    size_t mlen, len;
    uint64_t at;
    char *key;

    if (v->kind != CKPT_VAL_GLOBAL)
        return 0;
    mlen = strlen(v->u.global.module);
    len = mlen + 1 + strlen(v->u.global.name);
    if (len > gs->key_cap) {
        free(gs->key);
        if (!(gs->key = malloc(len)))
            return ckpt_error_oom();
        gs->key_cap = len;
    }
    memcpy(gs->key, v->u.global.module, mlen + 1);
    memcpy(gs->key + mlen + 1, v->u.global.name, len - mlen - 1);
    if (ckpt_strmap_get(&gs->index, gs->key, len, &at)) {
        ckpt_global_ref *g = &c->globals[at];
        /* the same name can be unsafe in one use only (getattr on an unknown object) */
        if ((v->flags & CKPT_VALUE_UNSAFE) && g->known) {
            g->known = 0;
            g->path = ckpt_arena_strndup(c->arena, path, strlen(path));
            if (!g->path)
                return CKPT_ENOMEM;
        }
        return 0;
    }
    if (!(key = ckpt_arena_alloc(c->arena, len)))
        return CKPT_ENOMEM;
    memcpy(key, gs->key, len);
    if (ckpt_strmap_add(&gs->index, key, len, c->n_globals, NULL) < 0)
        return CKPT_ENOMEM;
    globals = realloc(c->globals, (c->n_globals + 1) * sizeof *globals);
    if (!globals)
        return CKPT_ENOMEM;
    c->globals = globals;
    globals[c->n_globals].module = v->u.global.module;
    globals[c->n_globals].name = v->u.global.name;
    globals[c->n_globals].known = !(v->flags & CKPT_VALUE_UNSAFE);
    globals[c->n_globals].path = ckpt_arena_strndup(c->arena, path, strlen(path));
    if (!globals[c->n_globals].path)
        return CKPT_ENOMEM;
    c->n_globals++;
    return 0;
}

static int collect_globals(ckpt_ckpt *c)
{
    global_set gs = { c, CKPT_STRMAP_INIT, NULL, 0 };
    int rc;

    if (!c->root)
        return 0;
    rc = ckpt_value_walk(c->root, CKPT_MAX_TREE_DEPTH, collect_global, &gs);
    ckpt_strmap_dispose(&gs.index);
    free(gs.key);
    if (rc > 0)
        return ckpt_error_oom();
    return rc;
}

static int finish_open(ckpt_ckpt *c)
{
    size_t i;
    int rc;

    rc = name_tensors(c);
    if (rc < 0) {
        ckpt_error_prefix("%s", c->path);
        return rc;
    }
    for (i = 0; i < c->n_tensors; i++) {
        rc = ckpt_tensor_validate(&c->tensors[i]);
        if (rc < 0) {
            ckpt_error_prefix("%s", c->path);
            return rc;
        }
    }
    rc = ckpt_names__build(&c->names, c->tensors, c->n_tensors);
    if (rc < 0) {
        ckpt_error_prefix("%s", c->path);
        return rc;
    }
    rc = collect_globals(c);
    if (rc < 0) {
        ckpt_error_prefix("%s", c->path);
        return rc;
    }
    /* Opening touched headers all over the files (zip local headers, pickles); hand those
     * pages back so the resident set starts small whatever the checkpoint size. */
    for (i = 0; i < c->n_files; i++)
        ckpt_file_release(c->files[i], 0, c->files[i]->size);
    return 0;
}

/* The length of path without a trailing ".zst": a compressed file is named for what it
 * holds plus that suffix, and the io layer decompresses it whatever the format. */
static size_t strip_zst(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".zst") == 0 ? n - 4 : n;
}

/* n bytes in binary units, as the CLI prints sizes. */
static void size_words(char *out, size_t cap, double n)
{
    static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB" };
    size_t u = 0;

    while (n >= 1024.0 && u + 1 < sizeof units / sizeof *units) {
        n /= 1024.0;
        u++;
    }
    snprintf(out, cap, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
}

/* What decompressing the compressed inputs took, one note each. */
static void note_zstd(ckpt_ckpt *c)
{
    size_t i;

    for (i = 0; i < c->n_files; i++) {
        const ckpt_file *f = c->files[i];
        char zst[32], raw[32], speed[32];

        if (!f->zstd.zst_bytes)
            continue;
        size_words(zst, sizeof zst, (double)f->zstd.zst_bytes);
        size_words(raw, sizeof raw, (double)f->zstd.raw_bytes);
        size_words(speed, sizeof speed, f->zstd.seconds > 0 ? (double)f->zstd.raw_bytes / f->zstd.seconds : 0.0);
        ckpt_reader_note(&c->reader, "%s: zstd, %s -> %s (x%.2f), decompressed in %.1f s (%s/s)",
                         f->path, zst, raw, (double)f->zstd.raw_bytes / (double)f->zstd.zst_bytes,
                         f->zstd.seconds, speed);
    }
}

int ckpt_ckpt__zstd_check(void *arg, const char *path, const uint8_t *head, size_t n, int whole, uint64_t *need,
                          uint64_t *max_size)
{
    const ckpt_ckpt *c = arg;
    const ckpt_format_vtable *format = c->format;
    ckpt_file file;
    ckpt_probe probe;
    char *name = NULL;
    int rc = 0;

    memset(&file, 0, sizeof file);
    file.path = path;
    file.fd = -1;
    file.data = head;
    file.size = n;
    probe.path = path;
    probe.file = &file;
    probe.is_dir = 0;
    probe.partial = !whole;
    /* Bidders that weigh the name see the one without ".zst", as they will on open. */
    if (!format && !(probe.path = name = strndup(path, strip_zst(path))))
        return ckpt_error_oom();
    if (!format && (rc = choose_format(c, &probe, &format)) < 0 && !c->opts.format)
        rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_FORMAT,
                             "%s: the decompressed data is not a checkpoint of a known format", path);
    if (rc == 0 && format->bound)
        rc = format->bound(&probe, need, max_size);
    free(name);
    return rc;
}

typedef struct open_args {
    ckpt_ckpt *c;
    const ckpt_probe *probe;
} open_args;

static int choose_and_open(void *arg)
{
    open_args *a = arg;
    int rc = choose_format(a->c, a->probe, &a->c->format);
    return rc < 0 ? rc : a->c->format->open(&a->c->reader);
}

/* What the bidders look at: the path, and the mapped file unless it is a directory. */
static int probe_input(ckpt_ckpt *c, const char *path, const struct stat *st, ckpt_probe *probe)
{
    const ckpt_file *f;
    int rc;

    probe->path = c->path;
    probe->is_dir = S_ISDIR(st->st_mode);
    probe->file = NULL;
    probe->partial = 0;
    /* its files are held as the format opens them (reader.c) */
    if (probe->is_dir)
        return ckpt_inputs__hold(c, path);
    if ((rc = ckpt_reader_open_file(&c->reader, path, &f)) < 0)
        return rc;
    probe->file = f;
    /* Bidders that weigh the name see the one without ".zst" (model.safetensors.zst). */
    if (f->zstd.zst_bytes && !(probe->path = ckpt_arena_strndup(c->arena, path, strip_zst(path))))
        return ckpt_error_oom();
    return 0;
}

typedef struct detect_args {
    ckpt_ckpt *c;
    const ckpt_probe *probe;
    const ckpt_format_vtable *format;
} detect_args;

static int detect(void *arg)
{
    detect_args *a = arg;
    return choose_format(a->c, a->probe, &a->format);
}

const char *ckpt_format_detect(const char *path)
{
    detect_args a = { NULL, NULL, NULL };
    ckpt_probe probe;
    struct stat st;

    if (path && stat(path, &st) == 0 && ckpt_alloc(&a.c, path, NULL) == 0) {
        a.probe = &probe;
        if (probe_input(a.c, path, &st, &probe) < 0 || ckpt_file_guard(NULL, detect, &a) < 0)
            a.format = NULL;
        ckpt_close(a.c);
    }
    ckpt_error_clear();
    return a.format ? a.format->name : NULL;
}

int ckpt_open(ckpt_ckpt **out, const char *path, const ckpt_open_options *opts)
{
    ckpt_ckpt *c = NULL;
    ckpt_probe probe;
    open_args a;
    struct stat st;
    int rc;

    *out = NULL;
    if (!path || !*path)
        return ckpt_error_set(CKPT_EINVALID, "no input path given");
    if (opts && opts->version != 1 && opts->version != CKPT_OPEN_OPTIONS_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_open_options version %u, expected 1 to %u", opts->version,
                              CKPT_OPEN_OPTIONS_VERSION);
    if (stat(path, &st) != 0)
        return ckpt_error_setc(errno == ENOENT || errno == ENOTDIR ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_OS,
                               "%s: %s", path, strerror(errno));
    rc = ckpt_alloc(&c, path, opts);
    if (rc < 0)
        return rc;
    if ((rc = probe_input(c, path, &st, &probe)) < 0)
        goto done;
    /* Formats parse headers and pickles in place, in the mapped files: one that is cut short
     * meanwhile is an error naming it, not SIGBUS. What the interrupted parse had put in the
     * checkpoint's arena and reader goes with it below; the pickle VM, the longest of these
     * parses, runs under a guard of its own and frees its buffers itself. */
    a.c = c;
    a.probe = &probe;
    rc = ckpt_file_guard(NULL, choose_and_open, &a);
    if (rc < 0)
        goto done;
    rc = finish_open(c);
    if (rc == 0)
        note_zstd(c);
done:
    if (rc < 0) {
        ckpt_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* The input file of c whose mapping holds [p, p + len), or NULL. */
static const ckpt_file *file_holding(const ckpt_ckpt *c, const uint8_t *p, size_t len)
{
    uintptr_t at = (uintptr_t)p;
    size_t i;

    for (i = 0; i < c->n_files; i++) {
        const ckpt_file *f = c->files[i];
        uintptr_t base = (uintptr_t)f->data;
        if (f->data && at >= base && at - base <= f->size && len <= f->size - (at - base))
            return f;
    }
    return NULL;
}

static int open_window(ckpt_ckpt *c, const ckpt_file *f, const uint8_t *p, size_t len)
{
    ckpt_file *w = ckpt_arena_alloc(c->arena, sizeof *w);

    if (!w || !(c->files = malloc(sizeof *c->files)))
        return ckpt_error_oom();
    *w = *f;
    w->path = c->path;
    w->data = len ? p : NULL;
    w->size = len;
    w->fd_offset = f->fd_offset + (uint64_t)((uintptr_t)p - (uintptr_t)f->data);
    c->files[0] = w;
    c->n_files = 1;
    c->borrowed = 1;
    return 0;
}

int ckpt_open_item(const ckpt_ckpt **out, const ckpt_ckpt *outer, const ckpt_value *item, const char *name,
                   const ckpt_open_options *opts)
{
    ckpt_ckpt *o = (ckpt_ckpt *)outer, *c = NULL;
    struct ckpt_item *grown;
    const ckpt_file *f;
    ckpt_probe probe;
    ckpt_buf path = CKPT_BUF_INIT;
    open_args a;
    size_t i;
    int rc;

    *out = NULL;
    /* latin-1 text's bytes are not the item's bytes as they lie in the file */
    if (!outer || !item || item->kind != CKPT_VAL_BYTES || (item->flags & CKPT_BYTES_LATIN1_UTF8) || !name)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s: item '%s' is not bytes as stored",
                               outer ? outer->path : "(no checkpoint)", name ? name : "");
    for (i = 0; i < o->n_items; i++)
        if (o->items[i].item == item) {
            *out = o->items[i].ck;
            return 0;
        }
    if (!(f = file_holding(o, item->u.bytes.ptr, item->u.bytes.len)))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT,
                               "%s: item '%s' lies in no input file (only those are opened in place)", o->path, name);
    if (ckpt_buf_printf(&path, "%s, item '%s'", f->path, name) < 0)
        return CKPT_ENOMEM;
    rc = ckpt_alloc(&c, (const char *)path.data, opts);
    ckpt_buf_dispose(&path);
    if (rc < 0)
        return rc;
    if ((rc = open_window(c, f, item->u.bytes.ptr, item->u.bytes.len)) < 0)
        goto done;
    probe.path = c->path;
    probe.file = c->files[0];
    probe.is_dir = 0;
    probe.partial = 0;
    a.c = c;
    a.probe = &probe;
    if ((rc = ckpt_file_guard(NULL, choose_and_open, &a)) < 0 || (rc = finish_open(c)) < 0)
        goto done;
    if (!(grown = realloc(o->items, (o->n_items + 1) * sizeof *grown))) {
        rc = ckpt_error_oom();
        goto done;
    }
    o->items = grown;
    o->items[o->n_items].item = item;
    o->items[o->n_items++].ck = c;
done:
    if (rc < 0) {
        ckpt_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

const char *ckpt_path(const ckpt_ckpt *c)
{
    return c->path;
}

const char *ckpt_format_name(const ckpt_ckpt *c)
{
    return c->format->name;
}

uint64_t ckpt_input_size(const ckpt_ckpt *c)
{
    uint64_t total = 0;
    size_t i;
    /* on disk: a decompressed input counts as its compressed bytes */
    for (i = 0; i < c->n_files; i++)
        total += c->files[i]->zstd.zst_bytes ? c->files[i]->zstd.zst_bytes : c->files[i]->size;
    return total;
}

size_t ckpt_tensor_count(const ckpt_ckpt *c)
{
    return c->n_tensors;
}

const ckpt_tensor *ckpt_tensor_at(const ckpt_ckpt *c, size_t i)
{
    return i < c->n_tensors ? &c->tensors[i] : NULL;
}

const ckpt_tensor *ckpt_tensor_find(const ckpt_ckpt *c, const char *name)
{
    long i = ckpt_names__find(&c->names, name);
    return i < 0 ? NULL : &c->tensors[i];
}

const ckpt_value *ckpt_root(const ckpt_ckpt *c)
{
    return c->root;
}

size_t ckpt_note_count(const ckpt_ckpt *c)
{
    return c->n_notes;
}

const char *ckpt_note_at(const ckpt_ckpt *c, size_t i)
{
    return i < c->n_notes ? c->notes[i] : NULL;
}

size_t ckpt_global_count(const ckpt_ckpt *c)
{
    return c->n_globals;
}

const ckpt_global_ref *ckpt_global_at(const ckpt_ckpt *c, size_t i)
{
    return i < c->n_globals ? &c->globals[i] : NULL;
}

size_t ckpt_format_count(void)
{
    return ckpt_registry__count();
}

const char *ckpt_format_at(size_t i, unsigned *caps, const char **extensions)
{
    const ckpt_format_vtable *f = ckpt_registry__at(i);
    if (!f)
        return NULL;
    if (caps)
        *caps = f->caps;
    if (extensions)
        *extensions = f->extensions;
    return f->name;
}

static int has_extension(const char *path, const char *extensions)
{
    size_t plen = strip_zst(path);
    const char *e = extensions;

    while (*e) {
        size_t n = strcspn(e, " ");
        if (n && plen >= n && strncmp(path + plen - n, e, n) == 0)
            return 1;
        e += n;
        e += strspn(e, " ");
    }
    return 0;
}

const char *ckpt_format_for_path(const char *path)
{
    size_t i;
    for (i = 0; i < ckpt_registry__count(); i++) {
        const ckpt_format_vtable *f = ckpt_registry__at(i);
        if (f->extensions && has_extension(path, f->extensions))
            return f->name;
    }
    return NULL;
}
