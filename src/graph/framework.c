/* One model of any framework: the framework that reads or writes it is found in the registry
 * (formats/framework_registry.c), opens its checkpoint set when it has a directory scheme, and
 * fills the model through a builder: its family and config, its info, and every tensor at
 * full shape with its parallel cut. */
#include "framework_private.h"

#include <ckpt/sys/common.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct fw_tensor {
    char *name;
    const ckpt_node *full;
    ckpt_tensor_layout layout;
} fw_tensor;

struct ckpt_fw_builder {
    ckpt_fw *m;
};

struct ckpt_fw {
    const ckpt_fw_vtable *vt;
    void *state;
    ckpt_graph *g;
    ckpt_set *set;
    ckpt_fw_options opts;
    const ckpt_family *family;
    ckpt_family_config *config;
    int owns_config;
    ckpt_fw_info info;
    char *framework, *impl; /* info's strings */
    char *path;             /* ckpt_fw_open's */
    fw_tensor *tensors;
    size_t n_tensors, cap_tensors;
    ckpt_fw_builder builder;
    ckpt_fw *kept; /* ckpt_fw__keep */
};

ckpt_graph *ckpt_fw_builder_graph(ckpt_fw_builder *b)
{
    return b->m->g;
}

ckpt_set *ckpt_fw_builder_set(ckpt_fw_builder *b)
{
    return b->m->set;
}

const ckpt_fw_options *ckpt_fw_builder_options(const ckpt_fw_builder *b)
{
    return &b->m->opts;
}

const char *ckpt_fw_builder_path(const ckpt_fw_builder *b)
{
    return b->m->path;
}

const ckpt_family *ckpt_fw_builder_target_family(const ckpt_fw_builder *b, const ckpt_family_config **c)
{
    if (c)
        *c = b->m->config;
    return b->m->family;
}

int ckpt_fw_builder_family(ckpt_fw_builder *b, const ckpt_family *f, ckpt_family_config *c)
{
    ckpt_fw *m = b->m;

    if (m->owns_config)
        ckpt_family_config_free(m->config);
    m->family = f;
    m->config = c;
    m->owns_config = c != NULL;
    return 0;
}

int ckpt_fw_builder_family_read(ckpt_fw_builder *b, int rc, const ckpt_family *f, ckpt_family_config *c)
{
    if (rc == 0)
        return ckpt_fw_builder_family(b, f, c);
    ckpt_family_config_free(c);
    if (ckpt_fw_builder_options(b)->need_family)
        return rc;
    ckpt_error_clear();
    return 0;
}

static int copy_str(char **dst, const char *src)
{
    char *s = src ? strdup(src) : NULL;

    if (src && !s)
        return ckpt_error_oom();
    free(*dst);
    *dst = s;
    return 0;
}

int ckpt_fw_builder_info(ckpt_fw_builder *b, const ckpt_fw_info *info)
{
    ckpt_fw *m = b->m;
    int rc;

    if ((rc = copy_str(&m->framework, info->framework ? info->framework : m->vt->name)) < 0 ||
        (rc = copy_str(&m->impl, info->impl)) < 0)
        return rc;
    m->info = *info;
    m->info.framework = m->framework;
    m->info.impl = m->impl;
    return 0;
}

int ckpt_fw_builder_add(ckpt_fw_builder *b, const char *name, const ckpt_node *full, const ckpt_tensor_layout *l)
{
    ckpt_fw *m = b->m;
    fw_tensor *t;

    if (m->n_tensors == m->cap_tensors) {
        size_t cap = m->cap_tensors ? 2 * m->cap_tensors : 64;
        fw_tensor *ts = cap > SIZE_MAX / sizeof *ts ? NULL : realloc(m->tensors, cap * sizeof *ts);
        if (!ts)
            return ckpt_error_oom();
        m->tensors = ts;
        m->cap_tensors = cap;
    }
    t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name)))
        return ckpt_error_oom();
    t->full = full;
    if (l)
        t->layout = *l;
    else
        t->layout.layer = -1, t->layout.place = -1;
    m->n_tensors++;
    return 0;
}

/* "megatron, huggingface, ..." for refusals. */
static void known_frameworks(char *out, size_t size)
{
    size_t i, len = 0;

    out[0] = '\0';
    for (i = 0; i < ckpt_frameworks__count() && len < size; i++)
        len += (size_t)snprintf(out + len, size - len, "%s%s", i ? ", " : "", ckpt_frameworks__at(i)->name);
}

static int named_framework(const char *name, const ckpt_fw_vtable **out)
{
    char known[256];

    if ((*out = ckpt_frameworks__find(name)) != NULL)
        return 0;
    known_frameworks(known, sizeof known);
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT, "framework '%s' is not one ckptconv knows (%s)",
                           name, known);
}

/* The framework whose bid for path is highest. */
static int bid_framework(const char *path, const ckpt_fw_vtable **out)
{
    struct stat st;
    char known[256];
    int best = -1, bid;
    size_t i;

    *out = NULL;
    if (stat(path, &st) < 0)
        return ckpt_error_setc(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_OS, "%s: %s", path,
                               strerror(errno));
    for (i = 0; i < ckpt_frameworks__count(); i++) {
        const ckpt_fw_vtable *vt = ckpt_frameworks__at(i);
        int (*bid_of)(const char *, int) = vt->bid ? vt->bid : vt->layout ? vt->layout->bid : NULL;
        if (bid_of && (bid = bid_of(path, S_ISDIR(st.st_mode))) > best) {
            best = bid;
            *out = vt;
        }
    }
    if (*out)
        return 0;
    known_frameworks(known, sizeof known);
    return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_FORMAT, "%s: no framework reads it as a checkpoint (%s)",
                           path, known);
}

static int fw_alloc(ckpt_fw **out, const ckpt_fw_vtable *vt, ckpt_graph *g, const ckpt_fw_options *o)
{
    ckpt_fw *m;

    if (vt->abi_version != CKPT_FRAMEWORK_ABI_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "framework %s: ABI version %u, expected %u", vt->name, vt->abi_version,
                              CKPT_FRAMEWORK_ABI_VERSION);
    if (!(m = calloc(1, sizeof *m)))
        return ckpt_error_oom();
    m->vt = vt;
    m->g = g;
    m->builder.m = m;
    m->opts = o ? *o : (ckpt_fw_options)CKPT_FW_OPTIONS_INIT;
    m->info.framework = vt->name;
    m->info.tp = m->info.pp = m->info.vpp = m->info.ep = m->info.dp = 1;
    m->info.iteration = -1;
    *out = m;
    return 0;
}

int ckpt_fw_open(ckpt_fw **out, const char *path, ckpt_graph *g, const ckpt_fw_options *o)
{
    const ckpt_fw_vtable *vt;
    ckpt_fw *m = NULL;
    int rc;

    *out = NULL;
    if (o && o->version != CKPT_FW_OPTIONS_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_fw_options version %u, expected %u", o->version,
                              CKPT_FW_OPTIONS_VERSION);
    if ((rc = o && o->framework ? named_framework(o->framework, &vt) : bid_framework(path, &vt)) < 0 ||
        (rc = fw_alloc(&m, vt, g, o)) < 0)
        return rc;
    if (!(m->path = strdup(path))) {
        ckpt_fw_close(m);
        return ckpt_error_oom();
    }
    if (vt->layout) {
        ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
        so.layout = vt->layout->name;
        so.iteration = m->opts.iteration;
        rc = ckpt_set_open(&m->set, path, &so);
    }
    if (rc == 0)
        rc = vt->open(&m->builder, &m->state);
    if (rc < 0) {
        ckpt_fw_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

int ckpt_fw_new(ckpt_fw **out, const char *framework, ckpt_graph *g, const ckpt_family *f,
                const ckpt_family_config *c, const ckpt_fw_target *t)
{
    const ckpt_fw_vtable *vt;
    ckpt_fw *m = NULL;
    int rc;

    *out = NULL;
    if (!t || t->version != CKPT_FW_TARGET_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_fw_target version %u, expected %u", t ? t->version : 0,
                              CKPT_FW_TARGET_VERSION);
    if ((rc = named_framework(framework, &vt)) < 0)
        return rc;
    if (!vt->create)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT,
                               "framework %s reads checkpoints only; it does not write them", vt->name);
    if ((rc = fw_alloc(&m, vt, g, NULL)) < 0)
        return rc;
    m->family = f;
    m->config = (ckpt_family_config *)c; /* borrowed: owns_config stays 0 */
    if ((rc = vt->create(&m->builder, t, &m->state)) < 0) {
        ckpt_fw_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

int ckpt_fw_add(ckpt_fw *m, const char *name, const ckpt_node *full)
{
    if (!m->vt->add)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT, "framework %s takes no tensors", m->vt->name);
    return m->vt->add(m->state, name, full);
}

int ckpt_fw_plan(ckpt_fw *m, const ckpt_fw_target *t, ckpt_plan *plan)
{
    if (!t || t->version != CKPT_FW_TARGET_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_fw_target version %u, expected %u", t ? t->version : 0,
                              CKPT_FW_TARGET_VERSION);
    if (!m->vt->plan)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_ARGUMENT,
                               "framework %s reads checkpoints only; it does not write them", m->vt->name);
    return m->vt->plan(m->state, t, plan);
}

void ckpt_fw_close(ckpt_fw *m)
{
    size_t i;

    if (!m)
        return;
    ckpt_fw_close(m->kept);
    if (m->state && m->vt->free)
        m->vt->free(m->state);
    if (m->owns_config)
        ckpt_family_config_free(m->config);
    for (i = 0; i < m->n_tensors; i++)
        free(m->tensors[i].name);
    free(m->tensors);
    free(m->framework);
    free(m->impl);
    free(m->path);
    ckpt_set_close(m->set);
    free(m);
}

const ckpt_fw_info *ckpt_fw_info_of(const ckpt_fw *m)
{
    return &m->info;
}

const ckpt_family *ckpt_fw_family(const ckpt_fw *m)
{
    return m->family;
}

const ckpt_family_config *ckpt_fw_config(const ckpt_fw *m)
{
    return m->config;
}

size_t ckpt_fw_tensor_count(const ckpt_fw *m)
{
    return m->n_tensors;
}

const char *ckpt_fw_tensor_at(const ckpt_fw *m, size_t i, const ckpt_node **full, ckpt_tensor_layout *l)
{
    if (i >= m->n_tensors)
        return NULL;
    if (full)
        *full = m->tensors[i].full;
    if (l)
        *l = m->tensors[i].layout;
    return m->tensors[i].name;
}

void *ckpt_fw_native(ckpt_fw *m, const char *framework)
{
    if (strcmp(m->vt->name, framework) != 0 || !m->state)
        return NULL;
    return m->vt->native ? m->vt->native(m->state) : m->state;
}

ckpt_set *ckpt_fw_set(const ckpt_fw *m)
{
    return m->set;
}

const ckpt_fw_vtable *ckpt_fw__vtable(const ckpt_fw *m)
{
    return m->vt;
}

void *ckpt_fw__state(ckpt_fw *m)
{
    return m->state;
}

void ckpt_fw__keep(ckpt_fw *m, ckpt_fw *other)
{
    ckpt_fw_close(m->kept);
    m->kept = other;
}

int ckpt_fw_tensor_list_add(ckpt_fw_tensor_list *l, const char *name, const ckpt_node *node)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **names = cap > SIZE_MAX / sizeof *names ? NULL : realloc(l->names, cap * sizeof *names);
        const ckpt_node **nodes = names ? realloc(l->nodes, cap * sizeof *nodes) : NULL;
        if (names)
            l->names = names;
        if (!names || !nodes)
            return ckpt_error_oom();
        l->nodes = nodes;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(name)))
        return ckpt_error_oom();
    l->nodes[l->n++] = node;
    return 0;
}

void ckpt_fw_tensor_list_dispose(ckpt_fw_tensor_list *l)
{
    size_t i;

    for (i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    free(l->nodes);
    memset(l, 0, sizeof *l);
}
