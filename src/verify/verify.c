/* ckpt_verify: two models, layer by layer, on the same random inputs, on one backend. */
#include "run_private.h"

#include <ckpt/sys/common.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CKPT_HAVE_OPENMP
#include <omp.h>
#endif

typedef struct report {
    ckpt_verify_report pub;
    ckpt_verify_entry *entries;
    char (*names)[64];
    char **errors;
    char **notes;
    size_t n_notes;
    char device[256], tol_reason[96];
} report;

static int note(report *r, const char *fmt, ...) CKPT_FORMAT_PRINTF(2, 3);
static int note(report *r, const char *fmt, ...)
{
    char buf[1024], **grown, *copy;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!(copy = strdup(buf)) || !(grown = realloc(r->notes, (r->n_notes + 1) * sizeof *grown))) {
        free(copy);
        return ckpt_error_oom();
    }
    grown[r->n_notes++] = copy;
    r->notes = grown;
    return 0;
}

void ckpt_verify_report_free(ckpt_verify_report *pub)
{
    report *r = (report *)pub;
    size_t i;

    if (!r)
        return;
    for (i = 0; i < r->n_notes; i++)
        free(r->notes[i]);
    free(r->notes);
    for (i = 0; r->errors && i < r->pub.n_entries; i++)
        free(r->errors[i]);
    free(r->errors);
    free(r->entries);
    free(r->names);
    free(r);
}

/* Streams: layer L uses L; the model-level inputs use these. */
#define STREAM_TOKENS (UINT64_C(1) << 62)
#define STREAM_HIDDEN (STREAM_TOKENS + 1)

/* ---- precision and tolerance ---- */

static ckpt_dtype runnable(ckpt_dtype t)
{
    switch (t) {
    case CKPT_DTYPE_F32:
    case CKPT_DTYPE_F16:
    case CKPT_DTYPE_BF16: return t;
    case CKPT_DTYPE_F64: return CKPT_DTYPE_F32;
    default: return CKPT_DTYPE_BF16; /* fp8: exact in bfloat16 */
    }
}

static double tol_of(ckpt_dtype t)
{
    return t == CKPT_DTYPE_F32 ? 1e-5 : t == CKPT_DTYPE_F16 ? 2e-4 : 1e-3;
}

static int precisions(const ckpt_model *a, const ckpt_model *b, const ckpt_verify_options *o, run_ctx *ra,
                      run_ctx *rb, report *r)
{
    ckpt_dtype ta = runnable(ckpt_model_dtype(a)), tb = runnable(ckpt_model_dtype(b));
    ckpt_dtype lo = ta == CKPT_DTYPE_F32 ? tb : tb == CKPT_DTYPE_F32 ? ta : ta == tb ? ta : CKPT_DTYPE_F32;

    if (o->keep_precision || ta == tb) {
        ra->wdtype = ta;
        rb->wdtype = tb;
        r->pub.dtype = ta == tb ? ta : CKPT_DTYPE_INVALID;
        r->pub.tol = ta == tb ? tol_of(ta) : 8 * tol_of(ta == CKPT_DTYPE_F32 ? tb : ta);
        snprintf(r->tol_reason, sizeof r->tol_reason, "%s%s%s weights", ckpt_dtype_name(ta), ta == tb ? "" : " and ",
                 ta == tb ? "" : ckpt_dtype_name(tb));
        return 0;
    }
    ra->wdtype = rb->wdtype = lo;
    r->pub.dtype = lo;
    r->pub.tol = tol_of(lo);
    snprintf(r->tol_reason, sizeof r->tol_reason, "%s weights", ckpt_dtype_name(lo));
    if (lo == CKPT_DTYPE_F32)
        return note(r, "A's weights are %s and B's %s: both run in float32, which holds either exactly",
                    ckpt_dtype_name(ta), ckpt_dtype_name(tb));
    return note(r, "%s's %s weights are rounded to %s (round to nearest even, as torch's .to() rounds) so that "
                   "both models run the same numbers; --keep-precision runs each at its own",
                ta == lo ? "B" : "A", ckpt_dtype_name(ta == lo ? tb : ta), ckpt_dtype_name(lo));
}

static int say(void *payload, const char *text)
{
    return note(payload, "%s", text);
}

/* What each model's reading noted (a default it took, ranks it merged), then how the two
 * configs differ. */
static int config_notes(const ckpt_model *a, const ckpt_model *b, report *r)
{
    int rc = 0;
    size_t i;

    for (i = 0; rc == 0 && i < ckpt_model_note_count(a); i++)
        rc = note(r, "A: %s", ckpt_model_note_at(a, i));
    for (i = 0; rc == 0 && i < ckpt_model_note_count(b); i++)
        rc = note(r, "B: %s", ckpt_model_note_at(b, i));
    return rc == 0 ? ckpt_model__config_diff(a, b, say, r) : rc;
}

/* ---- layers to run ---- */

static int has_layer(const ckpt_model *m, int64_t index)
{
    size_t i;
    for (i = 0; i < ckpt_model_layer_count(m); i++)
        if (ckpt_model_layer_index(m, i) == index)
            return 1;
    return 0;
}

static int select_layers(const ckpt_model *a, const ckpt_model *b, const ckpt_verify_options *o, int64_t **out,
                         size_t *n, report *r)
{
    size_t i, only_a = 0, only_b = 0;
    int64_t *l = malloc((ckpt_model_layer_count(a) + o->n_layers + 1) * sizeof *l);

    *n = 0;
    if (!l)
        return ckpt_error_oom();
    if (o->layers) {
        for (i = 0; i < o->n_layers; i++) {
            if (!has_layer(a, o->layers[i]) || !has_layer(b, o->layers[i])) {
                free(l);
                return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MODEL, "layer %lld is not in %s",
                                       (long long)o->layers[i], has_layer(a, o->layers[i]) ? "B" : "A");
            }
            l[(*n)++] = o->layers[i];
        }
    } else {
        for (i = 0; i < ckpt_model_layer_count(a); i++) {
            int64_t x = ckpt_model_layer_index(a, i);
            if (has_layer(b, x))
                l[(*n)++] = x;
            else
                only_a++;
        }
        for (i = 0; i < ckpt_model_layer_count(b); i++)
            only_b += !has_layer(a, ckpt_model_layer_index(b, i));
        if ((only_a || only_b) &&
            note(r, "%zu layer%s only in A and %zu only in B, not compared", only_a, only_a == 1 ? "" : "s", only_b) < 0) {
            free(l);
            return CKPT_ENOMEM;
        }
    }
    *out = l;
    return 0;
}

/* ---- one comparison ---- */

static int compare(run_ctx *rc_, const float *x, const float *y, int64_t n, double tol, ckpt_verify_entry *e)
{
    ckpt_backend_compare_stats s;
    int rc = rc_->vt->compare(rc_->ctx, n, x, y, &s);

    if (rc < 0)
        return rc;
    e->max_abs = s.max_abs_diff;
    e->nonfinite_a = s.nonfinite_a;
    e->nonfinite_b = s.nonfinite_b;
    e->rel_l2 = s.sum_sq_a > 0 ? sqrt(s.sum_sq_diff / s.sum_sq_a) : s.sum_sq_diff > 0 ? INFINITY : 0.0;
    e->cosine = s.sum_sq_a > 0 && s.sum_sq_b > 0 ? s.dot / sqrt(s.sum_sq_a * s.sum_sq_b)
                : s.sum_sq_a == s.sum_sq_b      ? 1.0
                                                : 0.0;
    e->pass = !s.nonfinite_a && !s.nonfinite_b && e->rel_l2 <= tol;
    return 0;
}

/* ---- the run ---- */

typedef struct vrun {
    ckpt_model *a, *b;
    const ckpt_verify_options *o;
    run_ctx ra, rb;        /* one backend, two precisions and two RoPE tables */
    float *cos_a, *sin_a, *cos_b, *sin_b;
    float *x, *da, *db, *host;
    report *r;
    size_t done, total;
    double seconds_compare;
} vrun;

static void use_model(vrun *v, int b)
{
    run_ctx *r = b ? &v->rb : &v->ra;
    r->cos = b ? v->cos_b : v->cos_a;
    r->sin = b ? v->sin_b : v->sin_a;
}

static void progress(vrun *v, const char *what)
{
    if (v->o->progress)
        v->o->progress(v->done, v->total, what, v->o->progress_payload);
}

static int add_entry(vrun *v, int64_t index, const char *name, const float *x, const float *y, int64_t n)
{
    report *r = v->r;
    ckpt_verify_entry *e = &r->entries[r->pub.n_entries];
    double t0 = ckpt_run__now();
    int rc;

    snprintf(r->names[r->pub.n_entries], sizeof r->names[0], "%s", name);
    e->index = index;
    e->name = r->names[r->pub.n_entries];
    e->expert = -1;
    if ((rc = compare(&v->ra, x, y, n, r->pub.tol, e)) < 0)
        return rc;
    v->seconds_compare += ckpt_run__now() - t0;
    r->pub.n_entries++;
    return 0;
}

/* A layer whose tensors do not fit its model (a shape a conversion got wrong) is a failed
 * entry saying why, not the end of the run. */
static int unfit_layer(vrun *v, int64_t L, const char *name, const char *side)
{
    report *r = v->r;
    ckpt_verify_entry *e = &r->entries[r->pub.n_entries];
    char msg[1200];

    snprintf(msg, sizeof msg, "%s: %s", side, ckpt_error_last()->message);
    snprintf(r->names[r->pub.n_entries], sizeof r->names[0], "%s", name);
    if (!(r->errors[r->pub.n_entries] = strdup(msg)))
        return ckpt_error_oom();
    e->index = L;
    e->name = r->names[r->pub.n_entries];
    e->expert = -1;
    e->max_abs = e->rel_l2 = e->cosine = NAN;
    e->pass = 0;
    e->error = r->errors[r->pub.n_entries];
    r->pub.n_entries++;
    ckpt_error_clear();
    return 0;
}

/* Both models' layer L are MoE layers of as many experts: the router and every expert are
 * compared on their own as well, so that a failing layer names the expert or the router. */
/* Both models' layers are multi-latent attention: the attention alone is a row too, so that a
 * failing layer says whether its attention differs. */
static int attention_entries(const ckpt_model *a, const ckpt_model *b)
{
    return a->cfg.kv_lora_rank > 0 && b->cfg.kv_lora_rank > 0;
}

static int expert_entries(const ckpt_model *a, const ckpt_model *b, int64_t L)
{
    if (!ckpt_model__layer_moe(a, L) || !ckpt_model__layer_moe(b, L) || a->cfg.num_experts != b->cfg.num_experts)
        return 0;
    return 1 + (int)a->cfg.num_experts + (a->cfg.moe_shared_ffn_hidden_size > 0 && b->cfg.moe_shared_ffn_hidden_size > 0) +
           (a->cfg.moe_expert_bias || b->cfg.moe_expert_bias);
}

/* The routers' expert biases themselves (one model's missing one: zeros, as a router without
 * one chooses), so that a changed or lost bias is named even where it moves no token. */
static int run_expert_bias(vrun *v, int64_t L, const vlayer *la, const vlayer *lb)
{
    int64_t E = la->n_experts;
    size_t mark = v->ra.n_live, bytes = (size_t)E * sizeof(float);
    float *ha = calloc((size_t)E, sizeof *ha), *hb = calloc((size_t)E, sizeof *hb), *ya = NULL, *yb = NULL;
    char name[64];
    int rc = ha && hb ? 0 : ckpt_error_oom();

    if (rc == 0 && la->expert_bias)
        rc = ckpt_node_read(la->expert_bias, 0, E, CKPT_DTYPE_F32, ha);
    if (rc == 0 && lb->expert_bias)
        rc = ckpt_node_read(lb->expert_bias, 0, E, CKPT_DTYPE_F32, hb);
    if (rc == 0 && (rc = ckpt_run__alloc(&v->ra, bytes, (void **)&ya)) == 0 &&
        (rc = ckpt_run__alloc(&v->ra, bytes, (void **)&yb)) == 0 && (rc = v->ra.vt->upload(v->ra.ctx, ya, ha, bytes)) == 0 &&
        (rc = v->ra.vt->upload(v->ra.ctx, yb, hb, bytes)) == 0) {
        snprintf(name, sizeof name, "layer %lld router expert bias", (long long)L);
        if ((rc = add_entry(v, L, name, ya, yb, E)) == 0)
            v->r->entries[v->r->pub.n_entries - 1].part = CKPT_VERIFY_PART_EXPERT_BIAS;
    }
    while (v->ra.n_live > mark)
        v->ra.vt->release(v->ra.ctx, v->ra.live[--v->ra.n_live]);
    free(ha);
    free(hb);
    return rc;
}

/* Rows of the layer's input the router and each expert are compared on: every expert sees
 * them all, whatever the router picks. */
#define EXPERT_ROWS 16

static int run_experts(vrun *v, int64_t L, const vlayer *la, const vlayer *lb)
{
    int64_t S = v->ra.tokens < EXPERT_ROWS ? v->ra.tokens : EXPERT_ROWS, E = la->n_experts, e;
    size_t mark = v->ra.n_live;
    float *ya = NULL, *yb = NULL;
    char name[64];
    int rc;

    if ((rc = ckpt_run__alloc(&v->ra, (size_t)(S * E) * sizeof(float), (void **)&ya)) == 0 &&
        (rc = ckpt_run__alloc(&v->ra, (size_t)(S * E) * sizeof(float), (void **)&yb)) == 0 &&
        (rc = ckpt_run__router(&v->ra, v->a, la, S, v->x, ya)) == 0 &&
        (rc = ckpt_run__router(&v->rb, v->b, lb, S, v->x, yb)) == 0) {
        snprintf(name, sizeof name, "layer %lld router", (long long)L);
        if ((rc = add_entry(v, L, name, ya, yb, S * E)) == 0)
            v->r->entries[v->r->pub.n_entries - 1].part = CKPT_VERIFY_PART_ROUTER;
    }
    while (v->ra.n_live > mark)
        v->ra.vt->release(v->ra.ctx, v->ra.live[--v->ra.n_live]);
    if (rc == 0 && (v->a->cfg.moe_expert_bias || v->b->cfg.moe_expert_bias))
        rc = run_expert_bias(v, L, la, lb);
    for (e = la->rank[0].shared.ffn > 0 && lb->rank[0].shared.ffn > 0 ? -1 : 0; e < E && rc == 0; e++) {
        if (e < 0)
            snprintf(name, sizeof name, "layer %lld shared expert", (long long)L);
        else
            snprintf(name, sizeof name, "layer %lld expert %lld", (long long)L, (long long)e);
        if ((rc = ckpt_run__expert(&v->ra, v->a, la, e, S, v->x, v->da)) == 0 &&
            (rc = ckpt_run__expert(&v->rb, v->b, lb, e, S, v->x, v->db)) == 0)
            rc = add_entry(v, L, name, v->da, v->db, S * ckpt_model_config_of(v->a)->hidden_size);
        if (rc == 0) {
            v->r->entries[v->r->pub.n_entries - 1].part = e < 0 ? CKPT_VERIFY_PART_SHARED : CKPT_VERIFY_PART_EXPERT;
            v->r->entries[v->r->pub.n_entries - 1].expert = e < 0 ? -1 : e;
        }
    }
    return rc;
}

static int run_attention(vrun *v, int64_t L, const vlayer *la, const vlayer *lb)
{
    int64_t n = v->ra.tokens * ckpt_model_config_of(v->a)->hidden_size;
    char name[48];
    int rc;

    snprintf(name, sizeof name, "layer %lld attention", (long long)L);
    use_model(v, 0);
    rc = ckpt_run__attention(&v->ra, v->a, la, v->x, v->da);
    use_model(v, 1);
    if (rc == 0)
        rc = ckpt_run__attention(&v->rb, v->b, lb, v->x, v->db);
    if (rc == 0 && (rc = add_entry(v, L, name, v->da, v->db, n)) == 0)
        v->r->entries[v->r->pub.n_entries - 1].part = CKPT_VERIFY_PART_ATTENTION;
    return rc;
}

static int run_layer(vrun *v, int64_t L)
{
    int64_t n = v->ra.tokens * ckpt_model_config_of(v->a)->hidden_size;
    char name[32];
    vlayer la, lb;
    int rc;

    snprintf(name, sizeof name, "layer %lld", (long long)L);
    ckpt_rng__randn(v->o->seed, (uint64_t)L, v->host, n, v->ra.threads);
    if ((rc = v->ra.vt->upload(v->ra.ctx, v->x, v->host, (size_t)n * sizeof(float))) < 0)
        return rc;
    if ((rc = ckpt_model__layer(v->a, L, &la)) < 0)
        return ckpt_error_last()->klass == CKPT_ERRCLASS_MODEL ? unfit_layer(v, L, name, "A") : rc;
    if ((rc = ckpt_model__layer(v->b, L, &lb)) < 0) {
        ckpt_model__layer_dispose(&la);
        return ckpt_error_last()->klass == CKPT_ERRCLASS_MODEL ? unfit_layer(v, L, name, "B") : rc;
    }
    use_model(v, 0);
    rc = ckpt_run__layer(&v->ra, v->a, &la, v->x, v->da, NULL);
    use_model(v, 1);
    if (rc == 0)
        rc = ckpt_run__layer(&v->rb, v->b, &lb, v->x, v->db, NULL);
    if (rc == 0)
        rc = add_entry(v, L, name, v->da, v->db, n);
    if (rc == 0 && attention_entries(v->a, v->b))
        rc = run_attention(v, L, &la, &lb);
    if (rc == 0 && la.router && lb.router && la.n_experts == lb.n_experts)
        rc = run_experts(v, L, &la, &lb);
    ckpt_model__layer_dispose(&la);
    ckpt_model__layer_dispose(&lb);
    return rc;
}

static int run_model_level(vrun *v)
{
    const ckpt_model_config *ca = ckpt_model_config_of(v->a), *cb = ckpt_model_config_of(v->b);
    int64_t T = v->ra.tokens, H = ca->hidden_size, t;
    int64_t vocab = ca->vocab_size < cb->vocab_size ? ca->vocab_size : cb->vocab_size;
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    float *la = NULL, *lb = NULL;
    size_t mark = v->ra.n_live;
    ckpt_rng g;
    int rc = ids ? 0 : ckpt_error_oom();

    ckpt_rng__seed(&g, v->o->seed, STREAM_TOKENS, 0);
    for (t = 0; t < T && rc == 0; t++)
        ids[t] = (int32_t)(ckpt_rng__next(&g) % (uint64_t)vocab);
    if (rc == 0 && ckpt_model_has_embedding(v->a) && ckpt_model_has_embedding(v->b)) {
        progress(v, "embedding");
        use_model(v, 0);
        if ((rc = ckpt_run__embed(&v->ra, v->a, ids, v->da)) == 0 && (rc = ckpt_run__embed(&v->rb, v->b, ids, v->db)) == 0)
            rc = add_entry(v, -1, "embedding", v->da, v->db, T * H);
    }
    ckpt_rng__randn(v->o->seed, STREAM_HIDDEN, v->host, T * H, v->ra.threads);
    if (rc == 0)
        rc = v->ra.vt->upload(v->ra.ctx, v->x, v->host, (size_t)(T * H) * sizeof(float));
    if (rc == 0 && ckpt_model_has_final_norm(v->a) && ckpt_model_has_final_norm(v->b)) {
        progress(v, "final norm");
        if ((rc = ckpt_run__final_norm(&v->ra, v->a, v->x, v->da)) == 0 &&
            (rc = ckpt_run__final_norm(&v->rb, v->b, v->x, v->db)) == 0)
            rc = add_entry(v, -1, "final_norm", v->da, v->db, T * H);
        if (rc == 0 && (ckpt_model_has_output(v->a) || ca->tied_embeddings) &&
            (ckpt_model_has_output(v->b) || cb->tied_embeddings)) {
            progress(v, "logits");
            rc = ckpt_run__alloc(&v->ra, (size_t)(T * vocab) * sizeof(float), (void **)&la);
            if (rc == 0)
                rc = ckpt_run__alloc(&v->ra, (size_t)(T * vocab) * sizeof(float), (void **)&lb);
            if (rc == 0)
                rc = ckpt_run__logits(&v->ra, v->a, v->da, vocab, la);
            if (rc == 0)
                rc = ckpt_run__logits(&v->rb, v->b, v->db, vocab, lb);
            if (rc == 0)
                rc = add_entry(v, -1, "logits", la, lb, T * vocab);
        }
    }
    while (v->ra.n_live > mark)
        v->ra.vt->release(v->ra.ctx, v->ra.live[--v->ra.n_live]);
    free(ids);
    return rc;
}

/* Learned position embeddings cover so many positions; more tokens than that cannot run. */
static int cap_tokens(const ckpt_model *a, const ckpt_model *b, const ckpt_verify_options *o, int64_t *tokens,
                      report *r)
{
    const ckpt_model *m[2] = { a, b };
    int i;

    for (i = 0; i < 2; i++) {
        int64_t rows;
        if (m[i]->cfg.position != CKPT_POSITION_LEARNED || !m[i]->pos_embed)
            continue;
        rows = ckpt_node_shape(m[i]->pos_embed)[0];
        if (*tokens <= rows)
            continue;
        if (o->tokens)
            return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%s: %lld tokens, but position embeddings for "
                                   "%lld", m[i]->path, (long long)*tokens, (long long)rows);
        *tokens = rows;
        if (note(r, "%lld tokens: %s's position embeddings cover no more", (long long)rows, i ? "B" : "A") < 0)
            return CKPT_ENOMEM;
    }
    return 0;
}

/* The backend the options ask for; AUTO falls back to the CPU, saying why. */
static int open_backend(const ckpt_verify_options *o, ckpt_backend **out, report *r)
{
    int rc;

    if (o->device != CKPT_DEVICE_CPU) {
        rc = ckpt_backend_open(out, "cuda", 0);
        if (rc == 0 || o->device == CKPT_DEVICE_CUDA)
            return rc;
        if ((rc = note(r, "no GPU, running on the CPU (%s)", ckpt_error_last()->message)) < 0)
            return rc;
        ckpt_error_clear();
    }
    return ckpt_backend_open(out, "cpu", o->threads);
}

static int run(vrun *v, const int64_t *layers, size_t n_layers)
{
    int64_t n = v->ra.tokens * ckpt_model_config_of(v->a)->hidden_size;
    size_t i;
    int rc;

    if (!(v->host = malloc((size_t)n * sizeof *v->host)))
        return ckpt_error_oom();
    if ((rc = ckpt_run__rope(&v->ra, v->a)) < 0)
        return rc;
    v->cos_a = v->ra.cos;
    v->sin_a = v->ra.sin;
    if ((rc = ckpt_run__rope(&v->rb, v->b)) < 0)
        return rc;
    v->cos_b = v->rb.cos;
    v->sin_b = v->rb.sin;
    if ((rc = ckpt_run__alloc(&v->ra, (size_t)n * sizeof(float), (void **)&v->x)) < 0 ||
        (rc = ckpt_run__alloc(&v->ra, (size_t)n * sizeof(float), (void **)&v->da)) < 0 ||
        (rc = ckpt_run__alloc(&v->ra, (size_t)n * sizeof(float), (void **)&v->db)) < 0)
        return rc;
    for (i = 0; i < n_layers && rc == 0; i++, v->done++) {
        char what[48];
        snprintf(what, sizeof what, "layer %lld", (long long)layers[i]);
        progress(v, what);
        rc = run_layer(v, layers[i]);
    }
    if (rc == 0)
        rc = run_model_level(v);
    v->done = v->total;
    progress(v, "done");
    return rc;
}

int ckpt_verify(ckpt_model *a, ckpt_model *b, const ckpt_verify_options *user, ckpt_verify_report **out)
{
    ckpt_verify_options defaults = CKPT_VERIFY_OPTIONS_INIT;
    const ckpt_verify_options *o = user ? user : &defaults;
    ckpt_backend *be = NULL;
    report *r = calloc(1, sizeof *r);
    int64_t *layers = NULL;
    size_t n_layers = 0, n_entries = 3, i;
    vrun v;
    int rc;

    *out = NULL;
    memset(&v, 0, sizeof v);
    if (!r)
        return ckpt_error_oom();
    if (o->version < 1 || o->version > CKPT_VERIFY_OPTIONS_VERSION)
        rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "verify options version %u is not known", o->version);
    else if (ckpt_model_config_of(a)->hidden_size != ckpt_model_config_of(b)->hidden_size)
        rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL,
                             "A (%s) and B (%s) are different models: hidden size %lld and %lld", a->path, b->path,
                             (long long)ckpt_model_config_of(a)->hidden_size,
                             (long long)ckpt_model_config_of(b)->hidden_size);
    else if (o->tokens < 0 || o->tokens > (1 << 20))
        rc = ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_MODEL, "%lld tokens", (long long)o->tokens);
    else
        rc = select_layers(a, b, o, &layers, &n_layers, r);
    if (rc == 0)
        rc = config_notes(a, b, r);
    for (i = 0; rc == 0 && i < n_layers; i++)
        n_entries += 1 + (size_t)attention_entries(a, b) + (size_t)expert_entries(a, b, layers[i]);
    if (rc == 0 && !(r->entries = calloc(n_entries, sizeof *r->entries)))
        rc = ckpt_error_oom();
    if (rc == 0 && !(r->names = calloc(n_entries, sizeof *r->names)))
        rc = ckpt_error_oom();
    if (rc == 0 && !(r->errors = calloc(n_entries, sizeof *r->errors)))
        rc = ckpt_error_oom();
    if (rc == 0) {
        double t0 = ckpt_run__now();
        rc = open_backend(o, &be, r);
        r->pub.seconds_device = ckpt_run__now() - t0;
    }
    if (rc == 0) {
        v.a = a;
        v.b = b;
        v.o = o;
        v.r = r;
        v.total = n_layers + 1;
        v.ra.vt = v.rb.vt = ckpt_backend_vt(be);
        v.ra.ctx = v.rb.ctx = ckpt_backend_ctx(be);
#ifdef CKPT_HAVE_OPENMP
        v.ra.threads = v.rb.threads = o->threads > 0 ? o->threads : omp_get_max_threads();
#else
        v.ra.threads = v.rb.threads = 1;
#endif
        v.ra.tokens = v.rb.tokens = o->tokens ? o->tokens : 64;
        rc = cap_tokens(a, b, o, &v.ra.tokens, r);
        v.rb.tokens = v.ra.tokens;
        snprintf(r->device, sizeof r->device, "%s", ckpt_backend_description(be));
        r->pub.tokens = v.ra.tokens;
        if (rc == 0)
            rc = precisions(a, b, o, &v.ra, &v.rb, r);
        if (rc == 0 && o->tol > 0) {
            r->pub.tol = o->tol;
            snprintf(r->tol_reason, sizeof r->tol_reason, "given");
        }
        if (rc == 0)
            rc = run(&v, layers, n_layers);
        ckpt_run__release_all(&v.rb);
        ckpt_run__release_all(&v.ra);
        free(v.host);
    }
    ckpt_backend_close(be);
    free(layers);
    if (rc < 0) {
        ckpt_verify_report_free(&r->pub);
        return rc;
    }
    r->pub.device = r->device;
    r->pub.tol_reason = r->tol_reason;
    r->pub.entries = r->entries;
    r->pub.pass = 1;
    for (i = 0; i < r->pub.n_entries; i++)
        if (!r->entries[i].pass && r->pub.pass) {
            r->pub.pass = 0;
            r->pub.first_failure = &r->entries[i];
        }
    r->pub.notes = (const char *const *)r->notes;
    r->pub.n_notes = r->n_notes;
    r->pub.seconds_load = v.ra.seconds_load + v.rb.seconds_load;
    r->pub.seconds_a = v.ra.seconds_run;
    r->pub.seconds_b = v.rb.seconds_run;
    r->pub.seconds_compare = v.seconds_compare;
    *out = &r->pub;
    return 0;
}
