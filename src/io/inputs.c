/* Inputs held open in the process, and outputs checked against them (inputs.h). */
#include "inputs.h"

#include <ckpt/sys/common.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct held_input {
    const void *owner;
    dev_t dev;
    ino_t ino;
    int is_dir;
    char *path; /* as the owner named it, for messages */
} held_input;

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static held_input *held;
static size_t n_held, cap_held;

int ckpt_inputs__hold(const void *owner, const char *path)
{
    struct stat st;
    char *copy;
    int rc = 0;

    if (stat(path, &st) != 0)
        return 0;
    if (!(copy = strdup(path)))
        return ckpt_error_oom();
    pthread_mutex_lock(&held_lock);
    if (n_held == cap_held) {
        size_t cap = cap_held ? cap_held * 2 : 16;
        held_input *grown = realloc(held, cap * sizeof *grown);
        if (grown) {
            held = grown;
            cap_held = cap;
        } else {
            rc = ckpt_error_oom();
        }
    }
    if (rc == 0)
        held[n_held++] = (held_input){ owner, st.st_dev, st.st_ino, S_ISDIR(st.st_mode), copy };
    pthread_mutex_unlock(&held_lock);
    if (rc)
        free(copy);
    return rc;
}

void ckpt_inputs__release(const void *owner)
{
    size_t i = 0;

    pthread_mutex_lock(&held_lock);
    while (i < n_held) {
        if (held[i].owner == owner) {
            free(held[i].path);
            held[i] = held[--n_held];
        } else {
            i++;
        }
    }
    if (n_held == 0) {
        free(held);
        held = NULL;
        cap_held = 0;
    }
    pthread_mutex_unlock(&held_lock);
}

/* What an output is checked against: the held inputs, or one named input. */
typedef struct against {
    const held_input *inputs;
    size_t n;
} against;

static int refuse(const char *out, const held_input *in, int self)
{
    if (self && in->is_dir)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s and %s are the same directory", in->path,
                               out);
    if (self)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT,
                               "%s is the input %s: an output may not replace what is being read", out, in->path);
    return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_ARGUMENT, "%s is inside the input directory %s", out,
                           in->path);
}

/* The resolved path of `out`, or of its nearest existing ancestor (*self 0); NULL when none
 * can be resolved for another reason than a missing component (the output's own open then
 * says why). */
static char *resolve_existing(const char *out, int *self)
{
    char *copy = strdup(out), *resolved = NULL, *slash;
    size_t n;

    if (!copy)
        return NULL;
    *self = 1;
    for (n = strlen(copy); n > 1 && copy[n - 1] == '/';)
        copy[--n] = '\0';
    while (!(resolved = realpath(*copy ? copy : ".", NULL)) && (errno == ENOENT || errno == ENOTDIR)) {
        *self = 0;
        if (!*copy || strcmp(copy, ".") == 0 || strcmp(copy, "/") == 0)
            break;
        slash = strrchr(copy, '/');
        if (!slash)
            copy[0] = '\0';
        else if (slash == copy)
            copy[1] = '\0';
        else
            *slash = '\0';
    }
    free(copy);
    return resolved;
}

/* Compare the output, then each directory above it up to "/", with the inputs. */
static int check(const char *out, const against *a)
{
    struct stat st;
    int self, rc = 0;
    char *p = resolve_existing(out, &self), *slash;
    size_t i;

    while (p && rc == 0) {
        if (stat(p, &st) == 0)
            for (i = 0; i < a->n && rc == 0; i++)
                if (a->inputs[i].dev == st.st_dev && a->inputs[i].ino == st.st_ino && (self || a->inputs[i].is_dir))
                    rc = refuse(out, &a->inputs[i], self);
        self = 0;
        if (strcmp(p, "/") == 0)
            break;
        slash = strrchr(p, '/');
        if (!slash)
            break;
        if (slash == p)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    free(p);
    return rc;
}

int ckpt_inputs__check_output(const char *path)
{
    against a;
    int rc;

    pthread_mutex_lock(&held_lock);
    a.inputs = held;
    a.n = n_held;
    rc = check(path, &a);
    pthread_mutex_unlock(&held_lock);
    return rc;
}

int ckpt_inputs__check_apart(const char *path, const char *input)
{
    held_input in;
    struct stat st;
    against a = { &in, 1 };

    if (stat(input, &st) != 0)
        return 0;
    in = (held_input){ NULL, st.st_dev, st.st_ino, S_ISDIR(st.st_mode), (char *)input };
    return check(path, &a);
}
