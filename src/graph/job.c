/* The one conversion path: a source framework's model, through the family's maps where the
 * target is another framework, planned by the target framework. Every source tensor is
 * accounted for: taken by a rule, left out by a rule the family or the framework documents, or
 * dropped by the caller (--drop); any other is refused by name. */
#include "framework_private.h"

#include <ckpt/sys/common.h>

#include <stdlib.h>
#include <string.h>

typedef struct job {
    ckpt_plan *plan;
    const char *in, *name, *to;
    ckpt_fw *src, *dst;
    const ckpt_family *f;
    const ckpt_family_config *c;
    ckpt_map_input *kept;
    size_t n_kept;
    int64_t padded_rows; /* the source's vocabulary tables (0: none is cut by vocabulary) */
    ckpt_map_params *params;
    ckpt_map *maps[2];
    ckpt_map_result *res[2];
    int to_target;                 /* the index of the map into the target's names; -1: none */
    const char **variants;         /* the target's output variants, NULL-terminated */
} job;

/* The kept tensors by the names the normalize rules of the first map the job applies give
 * them (GPT-2's hub names without "transformer."), so that the source's check sees the layout
 * the family lists. The map's variant (the target's implementation) does not change its
 * normalize rules; the first one of the family serves where the target has not decided yet. */
static int normalized(const job *j, const char *to, const char *impl, ckpt_map_result **out)
{
    const ckpt_fw_info *from = ckpt_fw_info_of(j->src);
    ckpt_map_params *p = NULL;
    ckpt_map *m = NULL;
    int rc;

    *out = NULL;
    if (strcmp(from->framework, CKPT_FAMILY_HF) != 0)
        rc = ckpt_family_map(j->f, from->framework, from->impl, 1, &m);
    else if (to && strcmp(to, CKPT_FAMILY_HF) != 0)
        rc = ckpt_family_map(j->f, to, impl, 0, &m);
    else
        return 0;
    /* a map the family lacks is refused where the job loads its maps, after the target said
     * what it refuses */
    if (rc < 0) {
        ckpt_error_clear();
        return 0;
    }
    if ((rc = ckpt_map_params_new(&p)) == 0 && (rc = ckpt_family_map_params(j->f, j->c, p)) == 0)
        rc = ckpt_map_normalize(m, p, ckpt_plan_graph(j->plan), j->kept, j->n_kept, out);
    ckpt_map_params_free(p);
    ckpt_map_free(m);
    return rc;
}

static int check_inputs(const job *j, const char *to, const char *impl)
{
    const ckpt_fw_vtable *vt = ckpt_fw__vtable(j->src);
    ckpt_map_result *r = NULL;
    ckpt_map_input *in = NULL;
    size_t n, i;
    int rc;

    if (!vt->check)
        return 0;
    if ((rc = normalized(j, to, impl, &r)) < 0 || !r) {
        ckpt_map_result_free(r);
        return rc < 0 ? rc : vt->check(ckpt_fw__state(j->src), j->kept, j->n_kept);
    }
    n = ckpt_map_result_count(r);
    if (!(in = calloc(n + 1, sizeof *in)))
        rc = ckpt_error_oom();
    for (i = 0; in && i < n; i++) {
        in[i].name = ckpt_map_result_at(r, i)->name;
        in[i].node = ckpt_map_result_at(r, i)->node;
    }
    if (in)
        rc = vt->check(ckpt_fw__state(j->src), in, n);
    free(in);
    ckpt_map_result_free(r);
    return rc;
}

/* Whether a and b hold the same bytes (shape and dtype too). */
static int same_bytes(const ckpt_node *a, const ckpt_node *b, int *same)
{
    enum { CHUNK = 1 << 16 };
    ckpt_dtype dt = ckpt_node_dtype(a);
    int64_t n = ckpt_node_numel(a), at, k;
    size_t size = ckpt_dtype_size(dt);
    unsigned char *x, *y;
    int rc = 0;

    *same = dt == ckpt_node_dtype(b) && ckpt_node_ndim(a) == ckpt_node_ndim(b) &&
            memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) == 0;
    if (!*same)
        return 0;
    x = malloc((size_t)CHUNK * size);
    y = malloc((size_t)CHUNK * size);
    if (!x || !y)
        rc = ckpt_error_oom();
    for (at = 0; rc == 0 && *same && at < n; at += k) {
        k = n - at < CHUNK ? n - at : CHUNK;
        if ((rc = ckpt_node_read(a, at, k, dt, x)) == 0 && (rc = ckpt_node_read(b, at, k, dt, y)) == 0)
            *same = memcmp(x, y, (size_t)k * size) == 0;
    }
    free(x);
    free(y);
    return rc;
}

/* A multi-token prediction layer's copy of a main tensor (the family's mtp_shared): left out
 * (1) where it holds the bytes of that tensor, which the target shares, else refused naming
 * both; 0 where name is no copy. A --drop pattern takes it first. */
static int mtp_copy(job *j, const char *name, const ckpt_node *full)
{
    const char *fw = ckpt_fw_info_of(j->src)->framework, *of = ckpt_family_mtp_copy_of(j->f, j->c, fw, name);
    const ckpt_node *main_node = NULL;
    ckpt_buf why = CKPT_BUF_INIT;
    size_t i, n = ckpt_fw_tensor_count(j->src);
    int rc, same = 0;

    if (!of)
        return 0;
    if ((rc = ckpt_plan_leave_out(j->plan, name, NULL)) != 0)
        return rc;
    for (i = 0; i < n && !main_node; i++) {
        const ckpt_node *x;
        ckpt_tensor_layout l;
        if (strcmp(ckpt_fw_tensor_at(j->src, i, &x, &l), of) == 0)
            main_node = x;
    }
    if (!main_node)
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL,
                               "%s: tensor %s is a multi-token prediction layer's copy of %s, which is not there", j->in,
                               name, of);
    if ((rc = same_bytes(full, main_node, &same)) < 0)
        return rc;
    if (!same)
        return ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL,
                               "%s: tensor %s differs from %s: the target keeps one %s that the multi-token "
                               "prediction layers share, so an MTP layer of its own is not converted", j->in, name, of,
                               of);
    if ((rc = ckpt_buf_printf(&why, "the multi-token prediction layer's copy of %s (equal byte for byte), which the "
                                    "target shares", of)) == 0)
        rc = ckpt_plan_leave_out(j->plan, name, (const char *)why.data);
    ckpt_buf_dispose(&why);
    return rc;
}

/* The source tensors the conversion takes: every one but those a rule of the framework or the
 * family leaves out, or a --drop pattern, each recorded in the plan with its reason. */
static int keep_inputs(job *j, const char *to, const char *impl)
{
    const ckpt_fw_vtable *vt = ckpt_fw__vtable(j->src);
    const char *fw = ckpt_fw_info_of(j->src)->framework;
    size_t i, n = ckpt_fw_tensor_count(j->src);
    int rc;

    if (!(j->kept = calloc(n + 1, sizeof *j->kept)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++) {
        const ckpt_node *full;
        ckpt_tensor_layout l;
        const char *name = ckpt_fw_tensor_at(j->src, i, &full, &l);
        const char *rule = vt->left_out ? vt->left_out(ckpt_fw__state(j->src), name) : NULL;
        if (!rule)
            rule = ckpt_family_left_out(j->f, fw, name);
        if ((rc = rule ? 0 : mtp_copy(j, name, full)) != 0 || (rc = ckpt_plan_leave_out(j->plan, name, rule)) != 0) {
            if (rc < 0)
                return rc;
            continue;
        }
        if (l.tp == CKPT_TP_VOCAB && !j->padded_rows)
            j->padded_rows = ckpt_node_shape(full)[0];
        j->kept[j->n_kept].name = name;
        j->kept[j->n_kept++].node = full;
    }
    if ((rc = ckpt_plan_check_drop_patterns(j->plan)) < 0)
        return rc;
    return check_inputs(j, to, impl);
}

/* The family's maps: the source's names to Hugging Face's (unless the source is Hugging
 * Face), then Hugging Face's to the target's (unless the target is). */
static int load_maps(job *j)
{
    const ckpt_fw_info *from = ckpt_fw_info_of(j->src), *to = ckpt_fw_info_of(j->dst);
    size_t k = 0;
    int rc;

    if (strcmp(from->framework, CKPT_FAMILY_HF) != 0 &&
        (rc = ckpt_family_map(j->f, from->framework, from->impl, 1, &j->maps[k++])) < 0)
        return rc;
    j->to_target = -1;
    if (strcmp(to->framework, CKPT_FAMILY_HF) != 0) {
        j->to_target = (int)k;
        if ((rc = ckpt_family_map(j->f, to->framework, to->impl, 0, &j->maps[k])) < 0)
            return rc;
    }
    return 0;
}

static int set_params(job *j)
{
    const ckpt_fw_vtable *vt = ckpt_fw__vtable(j->dst);
    int rc;

    if ((rc = ckpt_map_params_new(&j->params)) < 0 || (rc = ckpt_family_map_params(j->f, j->c, j->params)) < 0 ||
        (j->padded_rows && (rc = ckpt_map_params_set(j->params, "padded_vocab_size", j->padded_rows)) < 0))
        return rc;
    return vt->map_params ? vt->map_params(ckpt_fw__state(j->dst), j->params) : 0;
}

/* The target's multi-token prediction layers' copies of main tensors (DeepSeek-V3's MTP
 * embed_tokens and shared_head.head, as its release stores them). */
static int add_mtp_copies(job *j, const ckpt_map_input *out, size_t n)
{
    ckpt_buf name = CKPT_BUF_INIT;
    const ckpt_node *copy;
    const char *of;
    int64_t m;
    size_t i, k;
    int rc = 1;

    for (m = 0; rc > 0; m++)
        for (i = 0; rc > 0; i++) {
            ckpt_buf_clear(&name);
            if ((rc = ckpt_family_mtp_copy(j->f, j->c, j->to, m, i, &name, &of)) <= 0) {
                rc = i > 0 && rc == 0 ? 1 : rc;
                break;
            }
            for (k = 0; k < n && strcmp(out[k].name, of) != 0; k++)
                ;
            if (k == n) {
                rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "%s: no %s to write %s from", j->in, of,
                                     (const char *)name.data);
                break;
            }
            /* a node of its own: the copy is stored, not shared */
            if ((rc = ckpt_node_slice(ckpt_plan_graph(j->plan), out[k].node, 0, 0, ckpt_node_shape(out[k].node)[0],
                                      &copy)) == 0 &&
                (rc = ckpt_fw_add(j->dst, (const char *)name.data, copy)) == 0)
                rc = 1;
        }
    ckpt_buf_dispose(&name);
    return rc < 0 ? rc : 0;
}

/* The kept tensors through the maps into the target; any a rule does not take is refused. */
static int map_tensors(job *j)
{
    const ckpt_map_input *in = j->kept;
    ckpt_map_input *next = NULL;
    size_t n = j->n_kept, i, k;
    int rc = 0;

    for (k = 0; k < 2 && j->maps[k] && rc == 0; k++) {
        if ((rc = ckpt_map_apply(j->maps[k], j->params, ckpt_plan_graph(j->plan), in, n,
                                 (int)k == j->to_target ? j->variants : NULL, &j->res[k])) < 0 ||
            (rc = ckpt_plan_check_taken(j->in, j->name, j->res[k])) < 0)
            break;
        free(next);
        n = ckpt_map_result_count(j->res[k]);
        if (!(next = calloc(n + 1, sizeof *next))) {
            rc = ckpt_error_oom();
            break;
        }
        for (i = 0; i < n; i++) {
            next[i].name = ckpt_map_result_at(j->res[k], i)->name;
            next[i].node = ckpt_map_result_at(j->res[k], i)->node;
        }
        in = next;
    }
    for (i = 0; i < n && rc == 0; i++)
        rc = ckpt_fw_add(j->dst, in[i].name, in[i].node);
    if (rc == 0)
        rc = add_mtp_copies(j, in, n);
    free(next);
    return rc;
}

static int convert(ckpt_plan *plan, const char *in, const ckpt_job_options *o, ckpt_fw *src)
{
    const ckpt_fw_vtable *vt = ckpt_fw__vtable(src);
    ckpt_fw_target t = o->target;
    job j;
    int rc;

    memset(&j, 0, sizeof j);
    j.plan = plan;
    j.in = in;
    j.to = o->to;
    j.name = o->name ? o->name : "ckpt_job_plan";
    j.src = src;
    j.f = ckpt_fw_family(src);
    j.c = ckpt_fw_config(src);
    if (!t.source)
        t.source = in;
    if (t.n_variants) {
        size_t i;
        if (!(j.variants = calloc(t.n_variants + 1, sizeof *j.variants)))
            return ckpt_error_oom();
        for (i = 0; i < t.n_variants; i++)
            j.variants[i] = t.variants[i];
    }
    if (!j.f || !j.c)
        rc = ckpt_error_setc(CKPT_EUNSUPPORTED, CKPT_ERRCLASS_MODEL, "%s: a model of no family ckptconv knows (%s)",
                             in, ckpt_family_known());
    else if ((rc = keep_inputs(&j, o->to, t.impl)) == 0 &&
             (rc = ckpt_fw_new(&j.dst, o->to, ckpt_plan_graph(plan), j.f, j.c, &t)) == 0 &&
             (rc = load_maps(&j)) == 0 && (rc = set_params(&j)) == 0 && (rc = map_tensors(&j)) == 0 &&
             (rc = ckpt_fw_plan(j.dst, &t, plan)) == 0 && vt->carry)
        rc = vt->carry(ckpt_fw__state(src), o->to, plan);
    if (rc == 0) {
        ckpt_fw__keep(src, j.dst);
        j.dst = NULL;
    }
    ckpt_fw_close(j.dst);
    ckpt_map_result_free(j.res[0]);
    ckpt_map_result_free(j.res[1]);
    ckpt_map_free(j.maps[0]);
    ckpt_map_free(j.maps[1]);
    ckpt_map_params_free(j.params);
    free(j.variants);
    free(j.kept);
    return rc;
}

static int plan_leave_out(void *plan, const char *name)
{
    return ckpt_plan_leave_out(plan, name, NULL);
}

int ckpt_job_plan(ckpt_plan *plan, const char *in, const ckpt_job_options *o, ckpt_fw **source_out)
{
    ckpt_fw_options from;
    ckpt_fw *src = NULL;
    int rc;

    *source_out = NULL;
    if (!o || o->version != CKPT_JOB_OPTIONS_VERSION)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_job_options version %u, expected %u", o ? o->version : 0,
                              CKPT_JOB_OPTIONS_VERSION);
    from = o->from;
    from.need_family |= o->to != NULL;
    /* the plan's --drop patterns, unless the caller decides */
    if (!from.leave_out) {
        from.leave_out = plan_leave_out;
        from.leave_out_payload = plan;
    }
    if ((rc = ckpt_fw_open(&src, in, ckpt_plan_graph(plan), &from)) < 0)
        return rc;
    if (!o->to || strcmp(o->to, ckpt_fw_info_of(src)->framework) == 0) {
        if ((rc = ckpt_plan_check_drop_patterns(plan)) == 0)
            rc = ckpt_fw_plan(src, &o->target, plan);
    } else {
        rc = convert(plan, in, o, src);
    }
    if (rc < 0) {
        ckpt_fw_close(src);
        return rc;
    }
    *source_out = src;
    return 0;
}
