/* Checkpoint sets: the layout modules name the member files, the engine opens them lazily. */
#include "engine.h"
#include "../io/inputs.h"

#include <ckpt/set.h>
#include <ckpt/sys/common.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct set_member {
    ckpt_member m;
    ckpt_ckpt *ck; /* opened on demand */
    uint64_t size;
} set_member;

struct ckpt_set_builder {
    ckpt_set *set;
};

struct ckpt_set {
    ckpt_set_options opts;
    ckpt_set_info info;
    ckpt_arena *arena;
    set_member *members;
    size_t n_members, cap_members;
    struct ckpt_set_builder builder;
};

static char *arena_str(ckpt_arena *a, const char *s)
{
    return s ? ckpt_arena_strndup(a, s, strlen(s)) : NULL;
}

int ckpt_set_builder_add(ckpt_set_builder *b, const char *rel, const ckpt_coords *at, const char *role)
{
    ckpt_set *s = b->set;
    set_member *m;
    ckpt_buf path = CKPT_BUF_INIT;
    struct stat st;

    if (s->n_members == s->cap_members) {
        size_t cap = s->cap_members ? 2 * s->cap_members : 16;
        set_member *ms = realloc(s->members, cap * sizeof *ms);
        if (!ms)
            return ckpt_error_oom();
        s->members = ms;
        s->cap_members = cap;
    }
    if (ckpt_buf_printf(&path, "%s/%s", s->info.root, rel) < 0)
        return CKPT_ENOMEM;
    m = &s->members[s->n_members];
    memset(m, 0, sizeof *m);
    m->m.rel = arena_str(s->arena, rel);
    m->m.path = arena_str(s->arena, (const char *)path.data);
    m->m.role = arena_str(s->arena, role ? role : "model");
    m->m.at = *at;
    m->size = stat(m->m.path, &st) == 0 ? (uint64_t)st.st_size : 0;
    ckpt_buf_dispose(&path);
    if (!m->m.rel || !m->m.path || !m->m.role)
        return CKPT_ENOMEM;
    s->n_members++;
    return 0;
}

int ckpt_set_builder_info(ckpt_set_builder *b, const ckpt_set_info *info)
{
    ckpt_set *s = b->set;
    const char *layout = s->info.layout;

    s->info = *info;
    s->info.layout = layout;
    s->info.root = arena_str(s->arena, info->root ? info->root : ".");
    s->info.dir = arena_str(s->arena, info->dir ? info->dir : "");
    return s->info.root && s->info.dir ? 0 : CKPT_ENOMEM;
}

const ckpt_set_options *ckpt_set_builder_options(const ckpt_set_builder *b)
{
    return &b->set->opts;
}

static int choose_layout(const ckpt_set *s, const char *path, const ckpt_layout_vtable **out)
{
    const ckpt_layout_vtable *best = NULL;
    int best_bid = -1;
    struct stat st;
    size_t i;

    if (stat(path, &st) < 0)
        return ckpt_error_set(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, "%s: %s", path, strerror(errno));
    if (s->opts.layout) {
        best = ckpt_layouts__find(s->opts.layout);
        if (!best)
            return ckpt_error_set(CKPT_EINVALID, "unknown checkpoint layout '%s'", s->opts.layout);
        *out = best;
        return 0;
    }
    for (i = 0; i < ckpt_layouts__count(); i++) {
        const ckpt_layout_vtable *l = ckpt_layouts__at(i);
        int bid = l->bid(path, S_ISDIR(st.st_mode));
        if (bid > best_bid) {
            best_bid = bid;
            best = l;
        }
    }
    if (!best || best_bid < 0)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: not a checkpoint directory of a known layout",
                               path);
    *out = best;
    return 0;
}

static void derive_sizes(ckpt_set *s)
{
    size_t i;
    int tp = 0, pp = 0, ep = 0, dp = 0;

    for (i = 0; i < s->n_members; i++) {
        const ckpt_coords *c = &s->members[i].m.at;
        tp = c->tp + 1 > tp ? c->tp + 1 : tp;
        pp = c->pp + 1 > pp ? c->pp + 1 : pp;
        ep = c->ep + 1 > ep ? c->ep + 1 : ep;
        dp = c->dp + 1 > dp ? c->dp + 1 : dp;
    }
    s->info.tp = s->info.tp ? s->info.tp : (tp ? tp : 1);
    s->info.pp = s->info.pp ? s->info.pp : (pp ? pp : 1);
    s->info.ep = s->info.ep ? s->info.ep : (ep ? ep : 1);
    s->info.dp = s->info.dp ? s->info.dp : (dp ? dp : 1);
}

int ckpt_set_open(ckpt_set **out, const char *path, const ckpt_set_options *opts)
{
    const ckpt_layout_vtable *layout = NULL;
    ckpt_set *s;
    int rc;

    *out = NULL;
    if (opts && opts->version != CKPT_SET_OPTIONS_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_set_options version %u, expected %u", opts->version,
                              CKPT_SET_OPTIONS_VERSION);
    s = calloc(1, sizeof *s);
    if (!s)
        return ckpt_error_oom();
    if (opts) {
        s->opts = *opts;
    } else {
        ckpt_set_options defaults = CKPT_SET_OPTIONS_INIT;
        s->opts = defaults;
    }
    s->builder.set = s;
    s->info.iteration = -1;
    if ((rc = ckpt_arena_new(&s->arena)) < 0 || (rc = choose_layout(s, path, &layout)) < 0 ||
        (rc = ckpt_inputs__hold(s, path)) < 0)
        goto fail;
    s->info.layout = layout->name;
    s->info.root = arena_str(s->arena, path);
    s->opts.layout = s->info.layout;
    if (!s->info.root) {
        rc = CKPT_ENOMEM;
        goto fail;
    }
    if ((rc = layout->list(&s->builder, path)) < 0)
        goto fail;
    derive_sizes(s);
    *out = s;
    return 0;
fail:
    ckpt_set_close(s);
    return rc;
}

void ckpt_set_close(ckpt_set *s)
{
    size_t i;

    if (!s)
        return;
    for (i = 0; i < s->n_members; i++)
        ckpt_close(s->members[i].ck);
    ckpt_inputs__release(s);
    free(s->members);
    ckpt_arena_free(s->arena);
    free(s);
}

const ckpt_set_info *ckpt_set_info_of(const ckpt_set *s)
{
    return &s->info;
}

size_t ckpt_set_member_count(const ckpt_set *s)
{
    return s->n_members;
}

const ckpt_member *ckpt_set_member_at(const ckpt_set *s, size_t i)
{
    return i < s->n_members ? &s->members[i].m : NULL;
}

long ckpt_set_find(const ckpt_set *s, const ckpt_coords *at, const char *role)
{
    size_t i;

    for (i = 0; i < s->n_members; i++) {
        const ckpt_member *m = &s->members[i].m;
        if (m->at.tp == at->tp && m->at.pp == at->pp && m->at.ep == at->ep && m->at.dp == at->dp &&
            m->at.shard == at->shard && (!role || strcmp(m->role, role) == 0))
            return (long)i;
    }
    return -1;
}

int ckpt_set_member_open(ckpt_set *s, size_t i, const ckpt_ckpt **out)
{
    int rc;

    if (i >= s->n_members)
        return ckpt_error_set(CKPT_EINVALID, "%s: no member %zu", s->info.root, i);
    if (!s->members[i].ck && (rc = ckpt_open(&s->members[i].ck, s->members[i].m.path, &s->opts.open)) < 0)
        return rc;
    *out = s->members[i].ck;
    return 0;
}

uint64_t ckpt_set_input_size(const ckpt_set *s)
{
    uint64_t total = 0;
    size_t i;

    for (i = 0; i < s->n_members; i++)
        total += s->members[i].size;
    return total;
}

size_t ckpt_layout_count(void)
{
    return ckpt_layouts__count();
}

const char *ckpt_layout_at(size_t i, const char **description)
{
    const ckpt_layout_vtable *l = ckpt_layouts__at(i);

    if (l && description)
        *description = l->description;
    return l ? l->name : NULL;
}
