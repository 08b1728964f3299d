/* Backends by name: the CPU backend is built in; others are modules loaded on demand, so
 * that a machine without CUDA runs everything else and never needs the CUDA libraries. */
#include "verify_private.h"

#include <ckpt/sys/common.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CKPT_INSTALL_LIBDIR
#define CKPT_INSTALL_LIBDIR ""
#endif

struct ckpt_backend {
    const ckpt_backend_vtable *vt;
    void *ctx;
    void *module; /* dlopen handle, NULL for built-in backends */
    char description[256];
};

static int host_error(int code, int klass, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ckpt_error_setc(code, klass, "%s", msg);
}

static const ckpt_backend_host host = {
    .abi_version = CKPT_BACKEND_ABI_VERSION,
    .error = host_error,
};

const ckpt_backend_host *ckpt_backend__host(void)
{
    return &host;
}

/* dirname of `path` into dir (with the trailing '/'), "" when it has none. */
static void dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) + 1 : 0;

    if (n >= cap)
        n = 0;
    memcpy(dir, path, n);
    dir[n] = '\0';
}

/* Try the places a module may be, in order; the reasons of the failures go into `why`. */
static void *load_module(const char *file, char *why, size_t why_cap)
{
    char dirs[4][PATH_MAX], path[PATH_MAX + 64];
    size_t n_dirs = 0, i, used = 0;
    const char *env = getenv("CKPT_BACKEND_DIR");
    ssize_t len;
    Dl_info info;
    void *h;

    why[0] = '\0';
    if (env && *env && snprintf(dirs[n_dirs], PATH_MAX, "%s/", env) < PATH_MAX)
        n_dirs++;
    len = readlink("/proc/self/exe", path, sizeof path - 1);
    if (len > 0) {
        path[len] = '\0';
        dir_of(path, dirs[n_dirs++], PATH_MAX);
    }
    if (dladdr((const void *)(uintptr_t)&ckpt_backend_open, &info) && info.dli_fname)
        dir_of(info.dli_fname, dirs[n_dirs++], PATH_MAX);
    if (CKPT_INSTALL_LIBDIR[0] && snprintf(dirs[n_dirs], PATH_MAX, "%s/", CKPT_INSTALL_LIBDIR) < PATH_MAX)
        n_dirs++;
    for (i = 0; i <= n_dirs; i++) {
        if (i < n_dirs) {
            if (!dirs[i][0])
                continue;
            if (snprintf(path, sizeof path, "%s%s", dirs[i], file) >= (int)sizeof path || access(path, F_OK) != 0)
                continue;
        } else {
            snprintf(path, sizeof path, "%s", file);
        }
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        if (used < why_cap) {
            int w = snprintf(why + used, why_cap - used, "%s%s", used ? "; " : "", dlerror());
            if (w > 0)
                used += (size_t)w;
        }
    }
    return NULL;
}

static int open_module(const char *name, const ckpt_backend_vtable **vt, void **module)
{
    char file[64], why[1024];
    ckpt_backend_entry_fn entry;
    void *h;

    snprintf(file, sizeof file, "libckpt_%s.so", name);
    h = load_module(file, why, sizeof why);
    if (!h)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_BACKEND, "backend '%s': cannot load %s (%s)", name,
                               file, why[0] ? why : "not found");
    *(void **)&entry = dlsym(h, CKPT_BACKEND_ENTRY);
    if (!entry) {
        dlclose(h);
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_BACKEND, "backend '%s': %s has no %s symbol", name, file,
                               CKPT_BACKEND_ENTRY);
    }
    *vt = entry();
    if (!*vt || (*vt)->abi_version != CKPT_BACKEND_ABI_VERSION) {
        unsigned got = *vt ? (*vt)->abi_version : 0;
        dlclose(h);
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_BACKEND,
                               "backend '%s': %s has backend ABI version %u, this library needs %u (rebuild it)",
                               name, file, got, (unsigned)CKPT_BACKEND_ABI_VERSION);
    }
    *module = h;
    return 0;
}

int ckpt_backend_open(ckpt_backend **out, const char *name, int device)
{
    ckpt_backend *b;
    int rc;

    *out = NULL;
    if (!name || !*name || strchr(name, '/'))
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_BACKEND, "backend name '%s' is not valid",
                               name ? name : "(null)");
    if (!(b = calloc(1, sizeof *b)))
        return ckpt_error_oom();
    if (strcmp(name, "cpu") == 0)
        b->vt = &ckpt_backend__cpu;
    else if ((rc = open_module(name, &b->vt, &b->module)) < 0) {
        free(b);
        return rc;
    }
    rc = b->vt->init(&b->ctx, &host, device, b->description, sizeof b->description);
    if (rc < 0) {
        if (b->module)
            dlclose(b->module);
        free(b);
        return rc;
    }
    *out = b;
    return 0;
}

void ckpt_backend_close(ckpt_backend *b)
{
    if (!b)
        return;
    if (b->ctx)
        b->vt->free(b->ctx);
    if (b->module)
        dlclose(b->module);
    free(b);
}

const ckpt_backend_vtable *ckpt_backend_vt(const ckpt_backend *b)
{
    return b->vt;
}

void *ckpt_backend_ctx(const ckpt_backend *b)
{
    return b->ctx;
}

const char *ckpt_backend_description(const ckpt_backend *b)
{
    return b->description;
}
