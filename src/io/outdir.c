/* Output directories built in a staging directory and moved into place at the end.
 *
 * Every file and subdirectory made in the staging directory is recorded, newest first, in
 * a list that a signal handler can walk without allocating: removing the entries in that
 * order empties each subdirectory before it is removed itself. The handler removes them
 * by name under the parent directory, never through a descriptor of the staging
 * directory: once that has been renamed into place, the names no longer resolve and the
 * finished output is left alone.
 *
 * Live directories sit in a fixed lock-free table, as the temporaries of outfile.c do. */
#include "inputs.h"
#include "wip.h"

#include <ckpt/outdir.h>
#include <ckpt/sys/common.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LIVE_DIRS 64

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "signal-safe cleanup needs lock-free atomic int");
_Static_assert(ATOMIC_POINTER_LOCK_FREE == 2, "signal-safe cleanup needs lock-free atomic pointers");

typedef struct outdir_entry {
    struct outdir_entry *next; /* older */
    int is_dir;
    char *path;                /* parent/staging_name/rel */
    char rel[];
} outdir_entry;

struct ckpt_outdir {
    char *final;         /* as the caller wrote it */
    char *parent;        /* absolute */
    size_t parent_len;
    char *base;          /* last component of the output */
    char *staging_name;  /* in parent */
    char *staging;       /* parent/staging_name */
    int parent_fd, staging_fd;
    int force;
    int moved;           /* the staging directory became the output */
    int slot;            /* in live_dirs, or -1 */
    _Atomic(outdir_entry *) entries;
    ckpt_buf notes;
};

/* Slot states, as in outfile.c: only the owner frees a slot (LIVE or CLEANED -> FREE); the
 * signal handler only moves LIVE -> CLEANING -> CLEANED. */
enum { SLOT_FREE, SLOT_CLAIMED, SLOT_LIVE, SLOT_CLEANING, SLOT_CLEANED };

static struct live_dir {
    atomic_int state;
    ckpt_outdir *dir;
} live_dirs[MAX_LIVE_DIRS];

static int dir_register(ckpt_outdir *d)
{
    int i;

    for (i = 0; i < MAX_LIVE_DIRS; i++) {
        int expected = SLOT_FREE;
        if (atomic_compare_exchange_strong(&live_dirs[i].state, &expected, SLOT_CLAIMED)) {
            live_dirs[i].dir = d;
            atomic_store(&live_dirs[i].state, SLOT_LIVE);
            return i;
        }
    }
    /* Still a working output; only the signal-time cleanup misses it. */
    return -1;
}

/* After this, no signal handler looks at the directory's memory any more. */
static void dir_unregister(ckpt_outdir *d)
{
    int slot = d->slot;

    d->slot = -1;
    while (slot >= 0) {
        int expected = SLOT_LIVE;
        if (atomic_compare_exchange_strong(&live_dirs[slot].state, &expected, SLOT_FREE))
            return;
        expected = SLOT_CLEANED;
        if (atomic_compare_exchange_strong(&live_dirs[slot].state, &expected, SLOT_FREE))
            return;
        /* CLEANING: a handler on another thread is removing entries; it does not block */
        sched_yield();
    }
}

static int mkdir_parents(const char *path)
{
    char *copy = strdup(path), *p;
    int rc = 0;

    if (!copy)
        return ckpt_error_oom();
    for (p = copy + 1; rc == 0; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(copy, 0777) < 0 && errno != EEXIST)
            rc = ckpt_error_set(CKPT_EIO, "%s: cannot create directory: %s", copy, strerror(errno));
        *p = saved;
        if (!saved)
            break;
    }
    free(copy);
    return rc;
}

/* Entries of a directory other than . and .., or -1 (errno set). */
static long count_entries(const char *path)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    long n = 0;

    if (!dir)
        return -1;
    while ((e = readdir(dir)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(dir);
    return n;
}

/* Split `final` into an absolute existing parent and a last component. */
static int resolve(ckpt_outdir *d, const char *final)
{
    char *copy = strdup(final), *slash, *parent_rel;
    size_t n;
    int rc = 0;

    if (!copy)
        return ckpt_error_oom();
    n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    slash = strrchr(copy, '/');
    if (slash) {
        *slash = '\0';
        parent_rel = slash == copy ? "/" : copy;
        d->base = strdup(slash + 1);
    } else {
        parent_rel = ".";
        d->base = strdup(copy);
    }
    if (!d->base) {
        rc = ckpt_error_oom();
    } else if (!*d->base || strcmp(d->base, ".") == 0 || strcmp(d->base, "..") == 0) {
        rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s: name the output directory itself (not '.', "
                             "'..' or '/')", final);
    } else if ((rc = mkdir_parents(parent_rel)) == 0 && !(d->parent = realpath(parent_rel, NULL))) {
        rc = ckpt_error_set(CKPT_EIO, "%s: %s", parent_rel, strerror(errno));
    }
    free(copy);
    return rc;
}

/* A non-empty directory is refused without force; a file always. */
static int check_final(const char *final, int force)
{
    struct stat st;
    long n;

    if (stat(final, &st) < 0)
        return errno == ENOENT ? 0 : ckpt_error_set(CKPT_EIO, "%s: %s", final, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s exists and is not a directory", final);
    if ((n = count_entries(final)) < 0)
        return ckpt_error_set(CKPT_EIO, "%s: %s", final, strerror(errno));
    if (n > 0 && !force)
        return ckpt_error_setc(CKPT_EEXISTS, CKPT_ERRCLASS_ARGUMENT,
                               "%s is not empty (%ld entries); use --force to write into it (files of the same "
                               "name are replaced, other files are kept)", final, n);
    return 0;
}

/* The staging directory, named after its owner (wip.h) so that a later run can remove it
 * if this one is killed; the stale ones of earlier runs go first. */
static int make_staging(ckpt_outdir *d)
{
    char name[NAME_MAX + 1];
    int attempt, rc;

    if ((d->parent_fd = open(d->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return ckpt_error_set(CKPT_EIO, "%s: %s", d->parent, strerror(errno));
    ckpt_wip__sweep(d->parent_fd, d->parent, &d->notes);
    for (attempt = 0; attempt < 100; attempt++) {
        if ((rc = ckpt_wip__name(name, sizeof name, d->base)) < 0)
            return rc;
        /* 0777: the umask decides, as for any directory the user makes */
        if (mkdirat(d->parent_fd, name, 0777) == 0)
            break;
        if (errno != EEXIST)
            return ckpt_error_set(CKPT_EIO, "%s: cannot create a staging directory: %s", d->parent, strerror(errno));
    }
    if (asprintf(&d->staging, "%s/%s", d->parent, name) < 0)
        return ckpt_error_oom();
    d->staging_name = d->staging + d->parent_len + 1;
    if ((d->staging_fd = open(d->staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return ckpt_error_set(CKPT_EIO, "%s: %s", d->staging, strerror(errno));
    return 0;
}

int ckpt_outdir_begin(ckpt_outdir **out, const char *final, int force)
{
    ckpt_outdir *d = calloc(1, sizeof *d);
    int rc;

    *out = NULL;
    if (!d)
        return ckpt_error_oom();
    d->parent_fd = d->staging_fd = d->slot = -1;
    d->force = force;
    if (!(d->final = strdup(final))) {
        rc = ckpt_error_oom();
        goto fail;
    }
    /* before resolve, which makes the missing parents */
    if ((rc = ckpt_inputs__check_output(final)) < 0 || (rc = check_final(final, force)) < 0 ||
        (rc = resolve(d, final)) < 0)
        goto fail;
    d->parent_len = strlen(d->parent);
    if ((rc = make_staging(d)) < 0)
        goto fail;
    d->slot = dir_register(d);
    *out = d;
    return 0;

fail:
    ckpt_outdir_abort(d);
    return rc;
}

static outdir_entry *record(ckpt_outdir *d, const char *rel, int is_dir)
{
    size_t n = strlen(rel);
    outdir_entry *e = malloc(sizeof *e + n + 1);

    if (!e) {
        ckpt_error_oom();
        return NULL;
    }
    memcpy(e->rel, rel, n + 1);
    e->is_dir = is_dir;
    if (asprintf(&e->path, "%s/%s", d->staging, rel) < 0) {
        free(e);
        ckpt_error_oom();
        return NULL;
    }
    e->next = atomic_load(&d->entries);
    atomic_store(&d->entries, e);
    return e;
}

static const outdir_entry *find(const ckpt_outdir *d, const char *rel)
{
    const outdir_entry *e;

    for (e = atomic_load(&d->entries); e; e = e->next)
        if (strcmp(e->rel, rel) == 0)
            return e;
    return NULL;
}

static int replaces_input(const ckpt_outdir *d, const char *rel)
{
    char *path;
    int rc;

    if (asprintf(&path, "%s/%s", d->final, rel) < 0)
        return ckpt_error_oom();
    rc = ckpt_inputs__check_output(path);
    free(path);
    return rc;
}

const char *ckpt_outdir_file(ckpt_outdir *d, const char *rel)
{
    char sub[PATH_MAX];
    const char *p;
    outdir_entry *e;

    if (!*rel || rel[0] == '/' || strstr(rel, "..") || strlen(rel) >= sizeof sub) {
        ckpt_error_set(CKPT_EINVALID, "%s: not a plain relative output name", rel);
        return NULL;
    }
    for (p = strchr(rel, '/'); p; p = strchr(p + 1, '/')) {
        memcpy(sub, rel, (size_t)(p - rel));
        sub[p - rel] = '\0';
        if (find(d, sub))
            continue;
        if (mkdirat(d->staging_fd, sub, 0777) < 0 && errno != EEXIST) {
            ckpt_error_set(CKPT_EIO, "%s/%s: cannot create directory: %s", d->staging, sub, strerror(errno));
            return NULL;
        }
        if (!record(d, sub, 1))
            return NULL;
    }
    if (find(d, rel)) {
        ckpt_error_set(CKPT_EEXISTS, "%s: written twice", rel);
        return NULL;
    }
    /* with force the files are merged into what is there, which may hold an input
     * (`reshard ckpt/iter_0000010 ckpt --force`): none may be replaced */
    if (d->force && replaces_input(d, rel) < 0)
        return NULL;
    e = record(d, rel, 0);
    return e ? e->path : NULL;
}

const char *ckpt_outdir_final(const ckpt_outdir *d)
{
    return d->final;
}

const char *ckpt_outdir_staging(const ckpt_outdir *d)
{
    return d->staging;
}

/* Remove every recorded entry, newest first, then the staging directory. Async-signal-safe. */
static void remove_staging(const ckpt_outdir *d)
{
    const outdir_entry *e;

    if (!d->staging)
        return;
    for (e = atomic_load(&d->entries); e; e = e->next)
        unlinkat(d->parent_fd, e->path + d->parent_len + 1, e->is_dir ? AT_REMOVEDIR : 0);
    unlinkat(d->parent_fd, d->staging_name, AT_REMOVEDIR);
}

void ckpt_outdir_cleanup_all(void)
{
    int saved_errno = errno;
    int i;

    for (i = 0; i < MAX_LIVE_DIRS; i++) {
        int expected = SLOT_LIVE;
        if (atomic_compare_exchange_strong(&live_dirs[i].state, &expected, SLOT_CLEANING)) {
            remove_staging(live_dirs[i].dir);
            atomic_store(&live_dirs[i].state, SLOT_CLEANED);
        }
    }
    errno = saved_errno;
}

void ckpt_outdir_abort(ckpt_outdir *d)
{
    outdir_entry *e;

    if (!d)
        return;
    dir_unregister(d);
    if (!d->moved)
        remove_staging(d);
    e = atomic_load(&d->entries);
    while (e) {
        outdir_entry *next = e->next;
        free(e->path);
        free(e);
        e = next;
    }
    if (d->staging_fd >= 0)
        close(d->staging_fd);
    if (d->parent_fd >= 0)
        close(d->parent_fd);
    ckpt_buf_dispose(&d->notes);
    free(d->staging);
    free(d->parent);
    free(d->base);
    free(d->final);
    free(d);
}

const char *ckpt_outdir_notes(const ckpt_outdir *d)
{
    return d->notes.len ? (const char *)d->notes.data : "";
}

/* --force into a non-empty directory: move the entries over one by one, oldest first,
 * so each subdirectory exists before its files arrive. The list stays as it is for the
 * signal handler, which then removes what is left in the staging directory. */
static int merge_into(ckpt_outdir *d, int final_fd)
{
    const outdir_entry *e, **order;
    size_t n = 0, i;
    int rc = 0;

    for (e = atomic_load(&d->entries); e; e = e->next)
        n++;
    if (!(order = malloc((n ? n : 1) * sizeof *order)))
        return ckpt_error_oom();
    i = n;
    for (e = atomic_load(&d->entries); e; e = e->next)
        order[--i] = e;
    for (i = 0; i < n && rc == 0; i++) {
        e = order[i];
        if (e->is_dir) {
            struct stat st;
            if (mkdirat(final_fd, e->rel, 0777) < 0 &&
                (errno != EEXIST || fstatat(final_fd, e->rel, &st, 0) < 0 || !S_ISDIR(st.st_mode)))
                rc = ckpt_error_set(CKPT_EIO, "%s/%s: cannot create directory: %s", d->final, e->rel,
                                    strerror(errno == EEXIST ? ENOTDIR : errno));
        } else if (renameat(d->staging_fd, e->rel, final_fd, e->rel) < 0) {
            rc = ckpt_error_set(CKPT_EIO, "%s/%s: cannot move into place: %s", d->final, e->rel, strerror(errno));
        }
    }
    free(order);
    return rc;
}

int ckpt_outdir_commit(ckpt_outdir *d)
{
    int rc = 0;

    if (renameat(d->parent_fd, d->staging_name, d->parent_fd, d->base) == 0) {
        d->moved = 1;
    } else if (d->force && (errno == ENOTEMPTY || errno == EEXIST)) {
        int final_fd = openat(d->parent_fd, d->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (final_fd < 0) {
            rc = ckpt_error_set(CKPT_EIO, "%s: %s", d->final, strerror(errno));
        } else {
            /* Runs writing into one directory at once commit one after the other: the later
             * one's files replace the earlier's, as if they had run in turn. */
            while (flock(final_fd, LOCK_EX) < 0 && errno == EINTR)
                ;
            rc = merge_into(d, final_fd);
            fsync(final_fd);
            close(final_fd);
        }
    } else {
        rc = errno == ENOTEMPTY || errno == EEXIST
                 ? ckpt_error_set(CKPT_EEXISTS, "%s: cannot move the output into place: it was filled meanwhile "
                                  "(another run?)", d->final)
                 : ckpt_error_set(CKPT_EIO, "%s: cannot move the output into place: %s", d->final, strerror(errno));
    }
    fsync(d->parent_fd);
    ckpt_outdir_abort(d);
    return rc;
}

int ckpt_outdir_check_apart(const char *final, const char *input)
{
    return ckpt_inputs__check_apart(final, input);
}
