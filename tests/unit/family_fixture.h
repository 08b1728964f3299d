/* What the model-family unit tests (test_family_*.c) share: a family fixture's safetensors as
 * map inputs, node look-ups and comparison, a fixture file as text, verify's forward against
 * the fixture's logits.json (transformers' logits), a map's result written as Megatron rank
 * files and read back through the inverse map as model.safetensors, and the first layer
 * verify fails at. A family's test says only its maps, parameters, args and what it breaks. */
#ifndef CKPT_TEST_FAMILY_FIXTURE_H
#define CKPT_TEST_FAMILY_FIXTURE_H

#include "test.h"

#include <ckpt/family.h>
#include <ckpt/hf.h>
#include <ckpt/megatron.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_IN 128 /* tensors of a fixture: deepseek_v3_tiny has 91 */

typedef struct fixture {
    ckpt_ckpt *ck;
    ckpt_graph *g;   /* the graph of in[]'s nodes */
    ckpt_graph *own; /* g when fx_open made it */
    ckpt_map_input in[MAX_IN];
    char names[MAX_IN][96];
    size_t n;
} fixture;

/* The tensors of testdata's `file` as map inputs in g (NULL: a graph of the fixture's own),
 * named without the prefix `strip` where they have it (NULL: as stored); fx_close after, on
 * failure too. */
static inline int fx_open(fixture *f, const char *file, const char *strip, ckpt_graph *g)
{
    size_t i;
    int rc;

    memset(f, 0, sizeof *f);
    if (!g && (rc = ckpt_graph_new(&f->own)) < 0)
        return rc;
    f->g = g ? g : f->own;
    if ((rc = ckpt_open(&f->ck, ckpt_test_data(file), NULL)) < 0)
        return rc;
    for (i = 0; i < ckpt_tensor_count(f->ck) && f->n < MAX_IN; i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f->ck, i);
        const char *name = t->name;
        if (strip && strncmp(name, strip, strlen(strip)) == 0)
            name += strlen(strip);
        snprintf(f->names[f->n], sizeof f->names[0], "%s", name);
        f->in[f->n].name = f->names[f->n];
        if ((rc = ckpt_node_tensor(f->g, t, &f->in[f->n].node)) < 0)
            return rc;
        f->n++;
    }
    return 0;
}

static inline void fx_close(fixture *f)
{
    ckpt_close(f->ck);
    ckpt_graph_free(f->own);
    memset(f, 0, sizeof *f);
}

/* The node of an input or of a map's output by name, or NULL. */
static inline const ckpt_node *fx_input(const fixture *f, const char *name)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        if (strcmp(f->in[i].name, name) == 0)
            return f->in[i].node;
    return NULL;
}

static inline const ckpt_node *fx_output(const ckpt_map_result *r, const char *name)
{
    size_t i;

    for (i = 0; i < ckpt_map_result_count(r); i++)
        if (strcmp(ckpt_map_result_at(r, i)->name, name) == 0)
            return ckpt_map_result_at(r, i)->node;
    return NULL;
}

/* Same dtype, shape and bytes. */
static inline int fx_same(const ckpt_node *a, const ckpt_node *b)
{
    size_t len;
    unsigned char *x, *y;
    int same;

    if (!a || !b || ckpt_node_dtype(a) != ckpt_node_dtype(b) || ckpt_node_ndim(a) != ckpt_node_ndim(b) ||
        memcmp(ckpt_node_shape(a), ckpt_node_shape(b), (size_t)ckpt_node_ndim(a) * sizeof(int64_t)) != 0)
        return 0;
    len = (size_t)ckpt_node_numel(a) * ckpt_dtype_size(ckpt_node_dtype(a));
    x = malloc(len + 1);
    y = malloc(len + 1);
    same = x && y && ckpt_node_read(a, 0, ckpt_node_numel(a), ckpt_node_dtype(a), x) >= 0 &&
           ckpt_node_read(b, 0, ckpt_node_numel(b), ckpt_node_dtype(b), y) >= 0 && memcmp(x, y, len) == 0;
    free(x);
    free(y);
    return same;
}

/* The built-in map `map` applied. */
static inline int fx_apply(const char *map, const ckpt_map_params *p, ckpt_graph *g, const ckpt_map_input *in,
                           size_t n, ckpt_map_result **r)
{
    ckpt_map *m = NULL;
    int rc = ckpt_map_builtin(&m, map);

    if (rc >= 0)
        rc = ckpt_map_apply(m, p, g, in, n, NULL, r);
    ckpt_map_free(m);
    return rc;
}

/* testdata's dir/name as NUL-terminated text (malloc'd), or NULL. */
static inline char *fx_text(const char *dir, const char *name)
{
    char path[512];
    size_t len;
    unsigned char *raw;
    char *text;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    raw = ckpt_test_read_file(ckpt_test_data(path), &len);
    text = raw ? malloc(len + 1) : NULL;
    if (text) {
        memcpy(text, raw, len);
        text[len] = 0;
    }
    free(raw);
    return text;
}

/* A config.json as save_pretrained writes it (one top-level key a line, at indent 2) without
 * the top-level keys `drop` (NULL-terminated), in place: what is left of a file that says its
 * model in transformers 4's keys too. 0, or -1 when one of them is not there. */
static inline int fx_drop_keys(char *text, const char *const *drop)
{
    char key[96], *at, *end;

    for (; *drop; drop++) {
        snprintf(key, sizeof key, "\n  \"%s\": ", *drop);
        if (!(at = strstr(text, key)))
            return -1;
        /* the entry ends where the next top-level line begins */
        end = strchr(at + 1, '\n');
        while (end && strncmp(end, "\n  \"", 4) != 0 && strncmp(end, "\n}", 2) != 0)
            end = strchr(end + 1, '\n');
        if (!end)
            return -1;
        if (end[1] == '}') /* the last key: the one before it loses its comma */
            at--;
        memmove(at, end, strlen(end) + 1);
    }
    return 0;
}

/* A config field as an integer (a bool as 0/1, None as -1); -99 when absent, -98 another kind. */
static inline int64_t fx_int(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0)
        return -99;
    return v->kind == CKPT_VAL_INT    ? v->u.integer
           : v->kind == CKPT_VAL_BOOL ? v->u.boolean
           : v->kind == CKPT_VAL_NONE ? -1
                                      : -98;
}

static inline double fx_real(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0)
        return -99;
    return v->kind == CKPT_VAL_FLOAT ? v->u.real : v->kind == CKPT_VAL_INT ? (double)v->u.integer : -98;
}

#define FX_MAX_TOKENS 16

/* The largest |difference| between the logits of verify's forward of the model at path (TP
 * ranks merged first with merge; the config values given in `overrides`, unless NULL, over the
 * files') and transformers' in testdata's `logits` file (a logits.json), over `vocab` columns;
 * INFINITY when the model cannot run or its vocabulary is not `vocab`, with *why (unless NULL)
 * saying why ("" otherwise). */
static inline double fx_logits_error_of(const char *path, const char *logits, int64_t vocab, int merge,
                                        const ckpt_model_config *overrides, const char **why)
{
    ckpt_model_options o;
    ckpt_model *m = NULL;
    char model[1024], *text;
    cJSON *j, *ids, *rows;
    int32_t tok[FX_MAX_TOKENS];
    float *out = malloc((size_t)(FX_MAX_TOKENS * vocab) * sizeof *out);
    double worst = INFINITY;
    int n, i, v;

    snprintf(model, sizeof model, "%s", path); /* path may be ckpt_test_data's buffer, reused below */
    text = fx_text(".", logits);
    j = text ? cJSON_Parse(text) : NULL;
    ids = cJSON_GetObjectItem(j, "input_ids");
    rows = cJSON_GetObjectItem(j, "logits");
    n = cJSON_GetArraySize(ids);
    free(text);
    if (why)
        *why = "";
    ckpt_model_options_init(&o);
    o.merge_tp = merge;
    if (overrides)
        o.overrides = *overrides;
    for (i = 0; i < n && i < FX_MAX_TOKENS; i++)
        tok[i] = cJSON_GetArrayItem(ids, i)->valueint;
    if (!out || n < 1 || n > FX_MAX_TOKENS || ckpt_model_open(&m, model, &o) < 0 ||
        ckpt_model_config_of(m)->vocab_size != vocab || ckpt_model_forward(m, NULL, tok, n, out) < 0) {
        if (why)
            *why = ckpt_error_last()->message;
    } else {
        worst = 0;
        for (i = 0; i < n; i++)
            for (v = 0; v < vocab; v++)
                worst = fmax(worst, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, i), v)->valuedouble -
                                         out[i * vocab + v]));
    }
    ckpt_model_close(m);
    cJSON_Delete(j);
    free(out);
    return worst;
}

/* fx_logits_error_of with the fixture's own fixture_dir/logits.json. */
static inline double fx_logits_error_with(const char *path, const char *fixture_dir, int64_t vocab, int merge,
                                          const ckpt_model_config *overrides, const char **why)
{
    char logits[256];

    snprintf(logits, sizeof logits, "%s/logits.json", fixture_dir);
    return fx_logits_error_of(path, logits, vocab, merge, overrides, why);
}

static inline double fx_logits_error(const char *path, const char *fixture_dir, int64_t vocab, int merge,
                                     const char **why)
{
    return fx_logits_error_with(path, fixture_dir, vocab, merge, NULL, why);
}

/* How fx_derive_hf_with makes tensor i of the fixture f: 1 with a name written into buf and
 * *node (a node of g: f->in[i].node, or one built from f's nodes), 0 to leave it out, or a
 * negative error code. */
typedef int (*fx_derive_fn)(ckpt_graph *g, const fixture *f, size_t i, char *buf, size_t cap,
                            const ckpt_node **node, void *payload);

/* A Hugging Face directory `dir` derived from testdata's `src` directory: its config.json
 * through edit_config, and its model.safetensors byte for byte (derive NULL) or tensor by
 * tensor through derive. The tests derive models this way rather than commit them. */
static inline int fx_derive_hf_with(const char *dir, const char *src, void (*edit_config)(cJSON *),
                                    fx_derive_fn derive, void *payload)
{
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_plan *plan = NULL;
    char path[512], *text = fx_text(src, "config.json"), *out = NULL, buf[MAX_IN][96];
    const char *names[MAX_IN];
    const ckpt_node *nodes[MAX_IN];
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    unsigned char *raw = NULL;
    size_t i, n = 0, len;
    fixture f;
    FILE *fp;
    int rc = CKPT_EIO;

    memset(&f, 0, sizeof f);
    free(text);
    if (!j)
        return CKPT_EFORMAT;
    edit_config(j);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (mkdir(dir, 0755) != 0 || !(out = cJSON_Print(j)) || !(fp = fopen(path, "w")))
        goto done;
    rc = fputs(out, fp) < 0 ? CKPT_EIO : 0;
    if (fclose(fp) != 0 || rc < 0) {
        rc = CKPT_EIO;
        goto done;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    if (!derive) {
        raw = ckpt_test_read_file(ckpt_test_data(path), &len);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        rc = raw && (fp = fopen(path, "wb")) ? 0 : CKPT_EIO;
        if (rc == 0 && (fwrite(raw, 1, len, fp) != len) + (fclose(fp) != 0))
            rc = CKPT_EIO;
        goto done;
    }
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = fx_open(&f, path, NULL, ckpt_plan_graph(plan))) < 0)
        goto done;
    if (ckpt_tensor_count(f.ck) > MAX_IN) {
        rc = CKPT_EINVALID;
        goto done;
    }
    for (i = 0; i < f.n; i++) {
        if ((rc = derive(ckpt_plan_graph(plan), &f, i, buf[n], sizeof buf[n], &nodes[n], payload)) < 0)
            goto done;
        if (rc > 0) {
            names[n] = buf[n];
            n++;
        }
    }
    po.force = 1; /* beside the config.json */
    if ((rc = ckpt_hf_plan_safetensors(plan, names, nodes, n, 0)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    fx_close(&f);
    ckpt_plan_free(plan);
    free(raw);
    free(out);
    cJSON_Delete(j);
    return rc;
}

typedef struct fx_rename {
    int (*rename)(const char *name, char *buf, size_t cap);
} fx_rename;

static inline int fx_derive_renamed(ckpt_graph *g, const fixture *f, size_t i, char *buf, size_t cap,
                                    const ckpt_node **node, void *payload)
{
    (void)g;
    *node = f->in[i].node;
    return ((const fx_rename *)payload)->rename(f->in[i].name, buf, cap);
}

/* fx_derive_hf_with, each tensor kept byte for byte (rename NULL) or named what rename
 * writes into buf (1: kept under that name, 0: left out). */
static inline int fx_derive_hf(const char *dir, const char *src, void (*edit_config)(cJSON *),
                               int (*rename)(const char *name, char *buf, size_t cap))
{
    fx_rename r = { rename };

    return fx_derive_hf_with(dir, src, edit_config, rename ? fx_derive_renamed : NULL, &r);
}

/* What fx_write_megatron writes of a map output `name`: 0 *node (which the edit may replace),
 * 1 nothing, or a negative error code. */
typedef int (*fx_edit)(int broken, ckpt_graph *g, const ckpt_map_result *r, const char *name, const ckpt_node **node);

/* A Megatron checkpoint at TP `tp` PP `pp` in dir: the tensors of testdata's `file` through
 * `to_megatron` with p, under args the callback makes in the plan's arena (for `impl`), with TE
 * extra states when extra_states, each output passed through edit (unless NULL) with `broken`. */
typedef struct fx_megatron_spec {
    const char *file;
    const ckpt_map *to_megatron;
    const ckpt_map_params *p;
    int (*args)(ckpt_arena *a, const char *impl, ckpt_value **args);
    const char *impl;
    int tp, pp, extra_states;
    fx_edit edit;
    int broken;
} fx_megatron_spec;

static inline int fx_write_megatron(const char *dir, const fx_megatron_spec *s)
{
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map_result *r = NULL;
    ckpt_value *args = NULL;
    fixture f;
    size_t i;
    int rc;

    memset(&f, 0, sizeof f);
    t.tp = s->tp;
    t.pp = s->pp;
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = fx_open(&f, s->file, NULL, ckpt_plan_graph(plan))) < 0 ||
        (rc = ckpt_map_apply(s->to_megatron, s->p, ckpt_plan_graph(plan), f.in, f.n, NULL, &r)) < 0 ||
        (rc = s->args(ckpt_plan_arena(plan), s->impl, &args)) < 0 ||
        (rc = ckpt_megatron_new(&m, ckpt_plan_graph(plan), args, 1, &mo)) < 0)
        goto done;
    for (i = 0; i < ckpt_map_result_count(r) && rc == 0; i++) {
        const char *name = ckpt_map_result_at(r, i)->name;
        const ckpt_node *node = ckpt_map_result_at(r, i)->node;
        int skip = s->edit ? s->edit(s->broken, ckpt_plan_graph(plan), r, name, &node) : 0;
        if (skip < 0)
            rc = skip;
        else if (!skip)
            rc = ckpt_megatron_add_tensor(m, name, node);
    }
    if (rc == 0 && (rc = ckpt_megatron_add_extra_states(m, s->extra_states)) == 0 &&
        (rc = ckpt_megatron_plan(m, &t, plan)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    ckpt_megatron_close(m);
    ckpt_map_result_free(r);
    fx_close(&f);
    ckpt_plan_free(plan);
    return rc;
}

/* The Megatron checkpoint at root read back through to_hf with p, as model.safetensors in dir.
 * With tied (the output layer a tied model's last stage keeps), that output is left out and
 * *tied_copy says whether it is the output `embedding`. */
static inline int fx_write_back(const char *root, const char *dir, const ckpt_map *to_hf, const ckpt_map_params *p,
                                const char *tied, const char *embedding, int *tied_copy)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_plan_options po = CKPT_PLAN_OPTIONS_INIT;
    ckpt_set *set = NULL;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    ckpt_map_result *r = NULL;
    ckpt_map_input in[MAX_IN];
    const char *names[MAX_IN];
    const ckpt_node *nodes[MAX_IN];
    size_t i, n = 0;
    int rc;

    so.layout = "megatron";
    if ((rc = ckpt_set_open(&set, root, &so)) < 0 || (rc = ckpt_plan_new(&plan)) < 0 ||
        (rc = ckpt_megatron_open(&m, set, ckpt_plan_graph(plan), &mo)) < 0)
        goto done;
    for (i = 0; i < ckpt_megatron_tensor_count(m) && n < MAX_IN; i++) {
        ckpt_tensor_layout l;
        const char *name = ckpt_megatron_tensor_at(m, i, &in[n].node, &l);
        if (strstr(name, "_extra_state"))
            continue;
        in[n].name = name;
        in[n++].home = 0;
    }
    if ((rc = ckpt_map_apply(to_hf, p, ckpt_plan_graph(plan), in, n, NULL, &r)) < 0)
        goto done;
    for (i = 0, n = 0; i < ckpt_map_result_count(r) && n < MAX_IN; i++) {
        if (tied && strcmp(ckpt_map_result_at(r, i)->name, tied) == 0) {
            *tied_copy = fx_same(ckpt_map_result_at(r, i)->node, fx_output(r, embedding));
            continue;
        }
        names[n] = ckpt_map_result_at(r, i)->name;
        nodes[n++] = ckpt_map_result_at(r, i)->node;
    }
    if ((rc = ckpt_hf_plan_safetensors(plan, names, nodes, n, 0)) == 0)
        rc = ckpt_plan_execute(plan, dir, &po, NULL);
done:
    ckpt_map_result_free(r);
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
    ckpt_set_close(set);
    return rc;
}

/* Whether dir/model.safetensors is testdata's `file` byte for byte. */
static inline int fx_same_file(const char *dir, const char *file)
{
    char path[512];
    unsigned char *a, *b;
    size_t la, lb;
    int same;

    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    a = ckpt_test_read_file(path, &la);
    b = ckpt_test_read_file(ckpt_test_data(file), &lb);
    same = a && b && la == lb && memcmp(a, b, la) == 0;
    free(a);
    free(b);
    return same;
}

/* The first failing layer of verify(a, b) on the CPU: -2 when every entry passed, -1 a
 * model-level entry, -3 when verify could not run; *why (buf) says why a failing entry or
 * verify could not run, NULL otherwise. */
static inline int64_t fx_first_failure(const char *a, const char *b, const char **why, char *buf, size_t cap)
{
    ckpt_verify_options vo = CKPT_VERIFY_OPTIONS_INIT;
    ckpt_model *x = NULL, *y = NULL;
    ckpt_verify_report *rep = NULL;
    int64_t layer = -3;

    vo.device = CKPT_DEVICE_CPU;
    *why = NULL;
    if (ckpt_model_open(&x, a, NULL) == 0 && ckpt_model_open(&y, b, NULL) == 0 && ckpt_verify(x, y, &vo, &rep) == 0)
        layer = rep->first_failure ? rep->first_failure->index : -2;
    if (rep && rep->first_failure && rep->first_failure->error) {
        snprintf(buf, cap, "%s", rep->first_failure->error);
        *why = buf;
    } else if (layer == -3) {
        snprintf(buf, cap, "%s", ckpt_error_last()->message);
        *why = buf;
    }
    ckpt_verify_report_free(rep);
    ckpt_model_close(x);
    ckpt_model_close(y);
    return layer;
}

#endif
