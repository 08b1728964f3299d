/* Trainable parameters of a ZeRO checkpoint, cut from the flat per-rank partitions of the
 * optimizer-states files, and (on request) their optimizer states, which the optimizer
 * keeps in partitions of exactly the same layout:
 *   stages 1/2: group g is the concatenation over ranks of each rank's partition of g
 *     (fp32: single_partition_of_fp32_groups[g]; state: base_optimizer_state state[g]);
 *     parameters follow one another from its start (plus param_alignment_paddings), what
 *     is left is alignment padding;
 *   stage 3: every parameter is split into W slices of ceil(n/W) elements, slice r at the
 *     same offset of rank r's flat partition (its sub-groups concatenated; fp32:
 *     fp32_flat_groups[k], state: optimizer_state_dict state[k]). */
#include "deepspeed_zero_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the elements of the flat groups come from. */
typedef struct zero_source {
    const char *state; /* NULL: the fp32 master weights; else an optimizer-state key */
    uint32_t flags;
} zero_source;

static const char *fp32_key(const ckpt_zero_build *b)
{
    return b->stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
}

/* The per-group fp32 partitions of optim file f. */
static const ckpt_value *zero_fp32_groups(const ckpt_zero_build *b, const ckpt_zero_file *f)
{
    const ckpt_value *g = ckpt_zero__get(ckpt_zero__get(f->root, "optimizer_state_dict"), fp32_key(b));

    if (!g || (g->kind != CKPT_VAL_LIST && g->kind != CKPT_VAL_TUPLE)) {
        ckpt_error_set(CKPT_EFORMAT, "%s: optimizer_state_dict has no %s list", f->path, fp32_key(b));
        return NULL;
    }
    return g;
}

/* The optimizer state of group g of file f: a dict of per-element tensors ("exp_avg") and
 * scalars ("step"). Stage 3 nests the torch optimizer's state dict under
 * optimizer_state_dict; stages 1/2 keep it as base_optimizer_state, or (elastic
 * checkpoints) as a list of one state per group. */
static const ckpt_value *zero_group_state(const ckpt_zero_build *b, const ckpt_zero_file *f, size_t g)
{
    const ckpt_value *osd = ckpt_zero__get(f->root, "optimizer_state_dict");
    const ckpt_value *base = ckpt_zero__get(osd, b->stage == 3 ? "optimizer_state_dict" : "base_optimizer_state");
    const ckpt_value *st = NULL;

    if (base && (base->kind == CKPT_VAL_LIST || base->kind == CKPT_VAL_TUPLE))
        st = g < base->u.seq.n ? base->u.seq.items[g] : NULL;
    else
        st = ckpt_zero__get_int(ckpt_zero__get(base, "state"), (int64_t)g);
    if (!st || st->kind != CKPT_VAL_DICT)
        ckpt_error_set(CKPT_EFORMAT, "%s: no optimizer state for %s %zu (optimizer_state_dict/%s)", f->path,
                       b->stage == 3 ? "sub-group" : "param group", g,
                       b->stage == 3 ? "optimizer_state_dict/state" : "base_optimizer_state");
    return st && st->kind == CKPT_VAL_DICT ? st : NULL;
}

/* Group g of optim file f from the source, as a part. */
static int zero_group_part(const ckpt_zero_build *b, const ckpt_zero_file *f, const zero_source *src, size_t g,
                           ckpt_zero_part *out)
{
    char what[160];

    if (!src->state) {
        const ckpt_value *groups = zero_fp32_groups(b, f);
        if (!groups)
            return CKPT_EFORMAT;
        if (g >= groups->u.seq.n)
            return ckpt_error_set(CKPT_EFORMAT, "%s: %s has %zu entries, group %zu is missing", f->path, fp32_key(b),
                                  groups->u.seq.n, g);
        snprintf(what, sizeof what, "%s[%zu]", fp32_key(b), g);
        return ckpt_zero__part_of(b, f, groups->u.seq.items[g], what, out);
    } else {
        const ckpt_value *st = zero_group_state(b, f, g);
        if (!st)
            return CKPT_EFORMAT;
        snprintf(what, sizeof what, "optimizer state %s of %s %zu", src->state,
                 b->stage == 3 ? "sub-group" : "param group", g);
        return ckpt_zero__part_of(b, f, ckpt_zero__get(st, src->state), what, out);
    }
}

static int zero_param_shape(const ckpt_zero_build *b, const ckpt_value *group, size_t i, size_t g, const char **name,
                            int *ndim, int64_t *shape, int64_t *numel)
{
    const ckpt_value *k = group->u.dict.map.keys[i];

    *name = k->kind == CKPT_VAL_STR ? k->u.str.ptr : "";
    if (k->kind != CKPT_VAL_STR || ckpt_zero__shape(group->u.dict.map.vals[i], ndim, shape, numel) < 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: param_shapes[%zu] entry %zu is not name -> torch.Size (%s)", b->dir,
                              g, i, ckpt_zero__base(b->st->model[0].path));
    return 0;
}

/* prefix name + "." + state into buf. */
static const char *zero_state_name(char *buf, size_t cap, const char *name, const zero_source *src)
{
    if (!src->state)
        return name;
    if ((size_t)snprintf(buf, cap, "%s.%s", name, src->state) >= cap) {
        ckpt_error_set(CKPT_EUNSUPPORTED, "parameter name %s is too long", name);
        return NULL;
    }
    return buf;
}

static int64_t zero_align(int64_t x, int64_t a)
{
    return (x + a - 1) / a * a;
}

/* param_alignment_paddings[g] (DeepSpeed >= 0.19: elements left after each parameter of
 * a group) for n parameters, or NULL when the checkpoint has none. */
static int zero_paddings(const ckpt_zero_build *b, size_t g, size_t n, const ckpt_value **out)
{
    const ckpt_value *all = ckpt_zero__get(ckpt_zero__get(b->st->optim[0].root, "optimizer_state_dict"),
                                           "param_alignment_paddings");
    const ckpt_value *p;

    *out = NULL;
    if (!all || all->kind == CKPT_VAL_NONE)
        return 0;
    if ((all->kind != CKPT_VAL_LIST && all->kind != CKPT_VAL_TUPLE) || g >= all->u.seq.n ||
        ((p = all->u.seq.items[g])->kind != CKPT_VAL_LIST && p->kind != CKPT_VAL_TUPLE))
        return ckpt_error_set(CKPT_EFORMAT, "%s: param_alignment_paddings has no list for param group %zu",
                              b->st->optim[0].path, g);
    if (p->u.seq.n != n)
        return ckpt_error_set(CKPT_EFORMAT, "%s: expected %zu parameter alignment paddings for param group %zu, "
                              "found %zu", b->st->optim[0].path, n, g, p->u.seq.n);
    *out = p;
    return 0;
}

static int zero_flat_12(ckpt_zero_build *b, const ckpt_value *shapes, const zero_source *src, ckpt_zero_part *parts)
{
    const ckpt_zero_state *st = b->st;
    int64_t shape[CKPT_MAX_DIMS], numel;
    size_t g, i, r, n_groups = shapes->u.seq.n;
    const char *name, *out_name;
    char buf[1024];
    int ndim, rc;

    for (r = 0; r < st->n_optim; r++) {
        const ckpt_value *groups = zero_fp32_groups(b, &st->optim[r]);
        if (!groups)
            return CKPT_EFORMAT;
        if (groups->u.seq.n != n_groups)
            return ckpt_error_set(CKPT_EFORMAT, "%s: %s has %zu param groups, param_shapes of %s has %zu", b->dir,
                                  ckpt_zero__base(st->optim[r].path), groups->u.seq.n,
                                  ckpt_zero__base(st->model[0].path), n_groups);
    }
    for (g = 0; g < n_groups; g++) {
        const ckpt_value *group = shapes->u.seq.items[g], *pads;
        int64_t avail = 0, offset = 0, pad;
        if (group->kind != CKPT_VAL_DICT)
            return ckpt_error_set(CKPT_EFORMAT, "%s: param_shapes[%zu] is not a dict (%s)", b->dir, g,
                                  ckpt_zero__base(st->model[0].path));
        if ((rc = zero_paddings(b, g, group->u.dict.map.n, &pads)) < 0)
            return rc;
        for (r = 0; r < st->n_optim; r++) {
            if ((rc = zero_group_part(b, &st->optim[r], src, g, &parts[r])) < 0)
                return rc;
            avail += parts[r].numel;
        }
        for (i = 0; i < group->u.dict.map.n; i++) {
            if ((rc = zero_param_shape(b, group, i, g, &name, &ndim, shape, &numel)) < 0)
                return rc;
            if (!(out_name = zero_state_name(buf, sizeof buf, name, src)))
                return CKPT_EUNSUPPORTED;
            if (numel > avail - offset)
                return ckpt_error_set(CKPT_EFORMAT, "%s: parameter %s needs elements [%lld, %lld) of param group "
                                      "%zu, the partitions hold %lld", b->dir, out_name, (long long)offset,
                                      (long long)(offset + numel), g, (long long)avail);
            ckpt_zero__begin(b, parts[0].t);
            rc = ckpt_zero__push_range(b, parts, st->n_optim, offset, numel, out_name);
            if (rc >= 0)
                rc = ckpt_zero__emit(b, out_name, ndim, shape, src->flags);
            if (rc < 0)
                return rc;
            offset += numel;
            if (pads && (ckpt_zero__int(pads->u.seq.items[i], &pad) < 0 || pad < 0 || pad > avail))
                return ckpt_error_set(CKPT_EFORMAT, "%s: param_alignment_paddings[%zu][%zu] is not a valid "
                                      "count", st->optim[0].path, g, i);
            offset += pads ? pad : 0;
        }
        if (zero_align(offset, 2 * b->world) != zero_align(avail, 2 * b->world))
            return ckpt_error_set(CKPT_EFORMAT, "%s: param group %zu: consumed %lld numels out of %lld - the "
                                  "partitions do not match param_shapes", b->dir, g, (long long)offset,
                                  (long long)avail);
    }
    return 0;
}

/* Rank r's sub-group parts into flat[r]; every rank must hold as many elements as rank 0. */
static int zero_flat_3_parts(ckpt_zero_build *b, const zero_source *src, ckpt_zero_part **flat, size_t *n_flat,
                             int64_t *avail0)
{
    const ckpt_zero_state *st = b->st;
    const ckpt_value *groups = zero_fp32_groups(b, &st->optim[0]);
    size_t g, r, n = groups ? groups->u.seq.n : 0;
    int rc;

    if (!groups)
        return CKPT_EFORMAT;
    for (r = 0; r < st->n_optim; r++) {
        int64_t total = 0;
        const ckpt_value *mine = zero_fp32_groups(b, &st->optim[r]);
        if (!mine)
            return CKPT_EFORMAT;
        if (mine->u.seq.n != n)
            return ckpt_error_set(CKPT_EFORMAT, "%s: %s has %zu sub-groups, %s has %zu", b->dir,
                                  ckpt_zero__base(st->optim[r].path), mine->u.seq.n,
                                  ckpt_zero__base(st->optim[0].path), n);
        if (!(flat[r] = calloc(n ? n : 1, sizeof **flat)))
            return ckpt_error_oom();
        n_flat[r] = n;
        for (g = 0; g < n; g++) {
            if ((rc = zero_group_part(b, &st->optim[r], src, g, &flat[r][g])) < 0)
                return rc;
            total += flat[r][g].numel;
        }
        if (r == 0)
            *avail0 = total;
        else if (total != *avail0)
            return ckpt_error_set(CKPT_EFORMAT, "%s: %s holds %lld %s elements, %s holds %lld", b->dir,
                                  ckpt_zero__base(st->optim[r].path), (long long)total,
                                  src->state ? src->state : "fp32", ckpt_zero__base(st->optim[0].path),
                                  (long long)*avail0);
    }
    return 0;
}

static int zero_flat_3(ckpt_zero_build *b, const ckpt_value *shapes, const zero_source *src)
{
    const ckpt_zero_state *st = b->st;
    int64_t shape[CKPT_MAX_DIMS], numel, offset = 0, avail0 = 0, w = b->world;
    ckpt_zero_part **flat = calloc(st->n_optim, sizeof *flat);
    size_t g, i, r, *n_flat = calloc(st->n_optim, sizeof *n_flat);
    const char *name, *out_name;
    char buf[1024];
    int ndim, rc = 0;

    if (!flat || !n_flat) {
        rc = ckpt_error_oom();
        goto done;
    }
    if ((rc = zero_flat_3_parts(b, src, flat, n_flat, &avail0)) < 0)
        goto done;
    for (g = 0; g < shapes->u.seq.n; g++) {
        const ckpt_value *group = shapes->u.seq.items[g];
        if (group->kind != CKPT_VAL_DICT) {
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: param_shapes[%zu] is not a dict (%s)", b->dir, g,
                                ckpt_zero__base(st->model[0].path));
            goto done;
        }
        for (i = 0; i < group->u.dict.map.n; i++) {
            int64_t q, left;
            if ((rc = zero_param_shape(b, group, i, g, &name, &ndim, shape, &numel)) < 0)
                goto done;
            if (!(out_name = zero_state_name(buf, sizeof buf, name, src))) {
                rc = CKPT_EUNSUPPORTED;
                goto done;
            }
            q = numel / w + (numel % w != 0);
            if (q > avail0 - offset) {
                rc = ckpt_error_set(CKPT_EFORMAT, "%s: parameter %s needs elements [%lld, %lld) of every rank's "
                                    "%s, they hold %lld", b->dir, out_name, (long long)offset, (long long)(offset + q),
                                    src->state ? "optimizer state" : "fp32_flat_groups", (long long)avail0);
                goto done;
            }
            b->n_ext = 0;
            if (n_flat[0])
                ckpt_zero__begin(b, flat[0][0].t);
            for (r = 0, left = numel; r < st->n_optim && left > 0; r++) {
                rc = ckpt_zero__push_range(b, flat[r], n_flat[r], offset, left < q ? left : q, out_name);
                if (rc < 0)
                    goto done;
                left -= left < q ? left : q;
            }
            if ((rc = ckpt_zero__emit(b, out_name, ndim, shape, src->flags)) < 0)
                goto done;
            offset += q;
        }
    }
    if (offset != avail0)
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: consumed %lld numels out of %lld - the %s do not match param_shapes",
                            b->dir, (long long)(offset * w), (long long)(avail0 * w),
                            src->state ? "optimizer states" : "fp32_flat_groups");
done:
    for (r = 0; flat && r < st->n_optim; r++)
        free(flat[r]);
    free(flat);
    free(n_flat);
    return rc;
}

static int zero_flat(ckpt_zero_build *b, const zero_source *src)
{
    const ckpt_value *shapes = ckpt_zero__get(b->st->model[0].root, "param_shapes");
    ckpt_zero_part *parts;
    int rc;

    if (!shapes || (shapes->kind != CKPT_VAL_LIST && shapes->kind != CKPT_VAL_TUPLE))
        return ckpt_error_set(CKPT_EFORMAT, "%s: no param_shapes list (checkpoint written before DeepSpeed 0.6?)",
                              b->st->model[0].path);
    if (b->stage == 3)
        return zero_flat_3(b, shapes, src);
    parts = calloc(b->st->n_optim, sizeof *parts);
    if (!parts)
        return ckpt_error_oom();
    rc = zero_flat_12(b, shapes, src, parts);
    free(parts);
    return rc;
}

int ckpt_zero__trainable(ckpt_zero_build *b)
{
    zero_source src = { NULL, 0 };
    return zero_flat(b, &src);
}

/* Every per-element state (a 1-D tensor: exp_avg, exp_avg_sq; not the scalar step) of
 * rank 0's first group, in the optimizer's order, each consolidated like the weights. */
int ckpt_zero__optimizer_states(ckpt_zero_build *b)
{
    const ckpt_value *st = zero_group_state(b, &b->st->optim[0], 0);
    size_t i, n = 0;
    int rc;

    if (!st)
        return CKPT_EFORMAT;
    for (i = 0; i < st->u.dict.map.n; i++) {
        const ckpt_value *k = st->u.dict.map.keys[i];
        const ckpt_tensor *t = ckpt_zero__tensor(&b->st->optim[0], st->u.dict.map.vals[i]);
        zero_source src;
        if (k->kind != CKPT_VAL_STR || !t || t->ndim != 1)
            continue;
        src.state = k->u.str.ptr;
        src.flags = CKPT_TENSOR_OPTIMIZER_STATE;
        if ((rc = zero_flat(b, &src)) < 0)
            return rc;
        n++;
    }
    if (n == 0)
        return ckpt_error_set(CKPT_EFORMAT, "%s: the optimizer keeps no per-element state (%s)", b->dir,
                              ckpt_zero__base(b->st->optim[0].path));
    return 0;
}
