/* DeepSpeed ZeRO checkpoint directories (stages 1, 2 and 3, BF16_Optimizer, and fp32
 * ZeRO-0), read as the one consolidated state dict DeepSpeed's zero_to_fp32 would produce.
 * Facts: docs formats/zero.md.
 *
 * The input is the directory holding `latest` (which names the tag directory; the tag
 * option overrides it) or the tag directory itself. Every *_model_states.pt and
 * *_optim_states.pt file of the tag is mapped and opened with the torch reader;
 * deepspeed_zero_merge.c then assembles the lazy tensors from their partitions. Rank r is
 * the r-th file in natural order (digit runs compared as numbers), as in zero_to_fp32.
 *
 * Files of several model-parallel ranks (mp_rank_00, mp_rank_01, ...: tensor parallelism)
 * are consolidated rank by rank: the root is then { "mp_rank_00": {state dict}, ... } and
 * tensor names start with "mp_rank_00/". With one rank the root is the state dict. */
#include "deepspeed_zero_private.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ZERO_MODEL_SUFFIX "_model_states.pt"
#define ZERO_OPTIM_SUFFIX "_optim_states.pt"
#define ZERO_LATEST_MAX 4096

typedef struct zero_names {
    char **v;
    size_t n, cap;
} zero_names;

static void zero_names_free(zero_names *l)
{
    size_t i;
    for (i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && memcmp(s + n - m, suffix, m) == 0;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Digit runs compare as numbers ("rank_10" after "rank_2"), everything else bytewise. */
static int natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            size_t la, lb;
            int c;
            while (*a == '0' && isdigit((unsigned char)a[1]))
                a++;
            while (*b == '0' && isdigit((unsigned char)b[1]))
                b++;
            for (la = 0; isdigit((unsigned char)a[la]); la++)
                ;
            for (lb = 0; isdigit((unsigned char)b[lb]); lb++)
                ;
            if (la != lb)
                return la < lb ? -1 : 1;
            c = memcmp(a, b, la);
            if (c)
                return c;
            a += la;
            b += lb;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int natural_qsort_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int c = natural_cmp(x, y);
    return c ? c : strcmp(x, y);
}

static int names_push(zero_names *l, const char *dir, const char *name)
{
    char *p;

    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return ckpt_error_oom();
        l->v = v;
        l->cap = cap;
    }
    p = join_path(dir, name);
    if (!p)
        return ckpt_error_oom();
    l->v[l->n++] = p;
    return 0;
}

/* The *_model_states.pt and *_optim_states.pt files of dir (not dot files, as a glob
 * would skip them), naturally sorted. With NULL lists it only counts. */
static int list_dir(const char *dir, zero_names *model, zero_names *optim, size_t *n_model, size_t *n_optim)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int rc = 0;

    *n_model = *n_optim = 0;
    if (!d)
        return ckpt_error_set(CKPT_ENOTFOUND, "%s: cannot list the directory", dir);
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (has_suffix(e->d_name, ZERO_MODEL_SUFFIX)) {
            ++*n_model;
            if (model)
                rc = names_push(model, dir, e->d_name);
        } else if (has_suffix(e->d_name, ZERO_OPTIM_SUFFIX)) {
            ++*n_optim;
            if (optim)
                rc = names_push(optim, dir, e->d_name);
        }
    }
    closedir(d);
    if (rc == 0 && model && model->n)
        qsort(model->v, model->n, sizeof *model->v, natural_qsort_cmp);
    if (rc == 0 && optim && optim->n)
        qsort(optim->v, optim->n, sizeof *optim->v, natural_qsort_cmp);
    return rc;
}

/* The tag named by <dir>/latest, whitespace stripped; 0, CKPT_ENOTFOUND when there is no
 * such file, or another error. */
static int read_latest(const char *dir, char **tag)
{
    char *path = join_path(dir, "latest"), buf[ZERO_LATEST_MAX + 1];
    size_t n, start = 0;
    FILE *f;

    *tag = NULL;
    if (!path)
        return ckpt_error_oom();
    f = fopen(path, "rb");
    free(path);
    if (!f)
        return CKPT_ENOTFOUND;
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n > ZERO_LATEST_MAX)
        return ckpt_error_set(CKPT_EFORMAT, "%s: 'latest' is over %d bytes, not a tag name", dir, ZERO_LATEST_MAX);
    while (n && isspace((unsigned char)buf[n - 1]))
        n--;
    while (start < n && isspace((unsigned char)buf[start]))
        start++;
    if (start == n || memchr(buf + start, '\0', n - start))
        return ckpt_error_set(CKPT_EFORMAT, "%s: 'latest' does not name a tag", dir);
    buf[n] = '\0';
    *tag = join_path(dir, buf + start);
    return *tag ? 0 : ckpt_error_oom();
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int zero_bid(const ckpt_probe *p, int best_bid)
{
    size_t n_model = 0, n_optim = 0;
    char *tag = NULL;
    int ok = 0;

    if (!p->is_dir || best_bid >= 90)
        return -1;
    if (read_latest(p->path, &tag) == 0 && is_dir(tag))
        ok = list_dir(tag, NULL, NULL, &n_model, &n_optim) == 0 && n_model > 0;
    else
        ok = list_dir(p->path, NULL, NULL, &n_model, &n_optim) == 0 && n_model > 0 && n_optim > 0;
    free(tag);
    ckpt_error_clear();
    return ok ? 90 : -1;
}

/* N of "<key>N_" in the file name, or -1. */
static long long number_after(const char *path, const char *key)
{
    const char *base = strrchr(path, '/'), *s;
    long long r = 0;

    s = strstr(base ? base + 1 : path, key);
    if (!s)
        return -1;
    s += strlen(key);
    if (!isdigit((unsigned char)*s))
        return -1;
    for (; isdigit((unsigned char)*s) && r < 1000000000; s++)
        r = r * 10 + (*s - '0');
    return *s == '_' ? r : -1;
}

static int open_files(ckpt_reader *r, const zero_names *names, ckpt_zero_file **out, size_t *n)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    size_t i;
    int rc;

    o.format = "torch";
    o.verify_crc = ckpt_reader_options(r)->verify_crc;
    *out = calloc(names->n ? names->n : 1, sizeof **out);
    if (!*out)
        return ckpt_error_oom();
    for (i = 0; i < names->n; i++) {
        ckpt_zero_file *f = &(*out)[i];
        f->path = names->v[i];
        names->v[i] = NULL;
        ++*n;
        f->rank = number_after(f->path, "zero_pp_rank_");
        f->mp = number_after(f->path, "mp_rank_");
        rc = ckpt_reader_open_file(r, f->path, &f->file);
        if (rc < 0)
            return rc;
        rc = ckpt_open(&f->ck, f->path, &o);
        if (rc < 0)
            return rc;
        f->root = ckpt_root(f->ck);
        if (!f->root || f->root->kind != CKPT_VAL_DICT)
            return ckpt_error_set(CKPT_EFORMAT, "%s: top level is not a dict (not a DeepSpeed checkpoint file)",
                                  f->path);
    }
    return 0;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* W files named zero_pp_rank_0 .. zero_pp_rank_{W-1}, in that order. */
static int check_ranks(const char *dir, const ckpt_zero_file *files, size_t n, int64_t w, const char *kind)
{
    long long missing = -1, r;
    size_t i;

    for (r = 0; r < w && missing < 0; r++) {
        int found = 0;
        for (i = 0; i < n && !found; i++)
            found = files[i].rank == r;
        if (!found)
            missing = r;
    }
    for (i = 0; i < n && missing >= 0; i++)
        if (files[i].rank < 0)
            missing = -2; /* names without ranks: only the count can be checked */
    if ((int64_t)n != w) {
        if (missing >= 0)
            return ckpt_error_set(CKPT_EFORMAT, "%s: expected %lld *%s files for world size %lld, found %zu: "
                                  "zero_pp_rank_%lld missing", dir, (long long)w, kind, (long long)w, n, missing);
        return ckpt_error_set(CKPT_EFORMAT, "%s: expected %lld *%s files for world size %lld, found %zu%s", dir,
                              (long long)w, kind, (long long)w, n,
                              (int64_t)n > w ? " (pipeline-parallel and MoE checkpoints are not supported)" : "");
    }
    for (i = 0; i < n; i++)
        if (files[i].rank >= 0 && files[i].rank != (long long)i)
            return ckpt_error_set(CKPT_EFORMAT, "%s: expected %lld *%s files for world size %lld: "
                                  "zero_pp_rank_%lld missing (%s is extra)", dir, (long long)w, kind, (long long)w,
                                  missing >= 0 ? missing : (long long)i, base_name(files[i].path));
    return 0;
}

/* Stage and partition count from the first optim file (notes only for the first rank). */
static int zero_stage(ckpt_reader *r, ckpt_zero_build *b, const ckpt_zero_file *f, int first)
{
    const ckpt_value *osd = ckpt_zero__get(f->root, "optimizer_state_dict");
    const ckpt_value *pc = ckpt_zero__get(osd, "partition_count");
    int64_t stage = 0, w = 0;
    size_t i;

    if (!ckpt_zero__get(osd, "zero_stage")) {
        if (!ckpt_zero__get(osd, "single_partition_of_fp32_groups") || !pc)
            return ckpt_error_set(CKPT_EFORMAT, "%s is not a ZeRO optimizer-states file (no zero_stage)", f->path);
        /* BF16_Optimizer: stage-1 layout whose partitions keep their end padding, which
         * the merge skips as it does stage 1's alignment */
        if (first)
            ckpt_reader_note(r, "BF16_Optimizer checkpoint (no ZeRO stage), merged as ZeRO stage 1; DeepSpeed's "
                             "zero_to_fp32 refuses it");
        stage = 1;
    } else if (ckpt_zero__int(ckpt_zero__get(osd, "zero_stage"), &stage) < 0 || stage < 1 || stage > 3) {
        return ckpt_error_set(CKPT_EFORMAT, "%s: unknown zero stage (optimizer_state_dict/zero_stage)", f->path);
    }
    if (pc && (pc->kind == CKPT_VAL_LIST || pc->kind == CKPT_VAL_TUPLE)) {
        for (i = 0; i < pc->u.seq.n; i++) {
            int64_t v;
            if (ckpt_zero__int(pc->u.seq.items[i], &v) < 0)
                break;
            w = v > w ? v : w;
        }
        if (i < pc->u.seq.n)
            w = 0;
    } else if (ckpt_zero__int(pc, &w) < 0) {
        w = 0;
    }
    if (w < 1 || w > 1000000)
        return ckpt_error_set(CKPT_EFORMAT, "%s: no valid partition_count (optimizer_state_dict/partition_count)",
                              f->path);
    b->stage = (int)stage;
    b->world = w;
    return 0;
}

static void zero_close(ckpt_reader *r)
{
    void **state = ckpt_reader_state(r);
    ckpt_zero_state *st = *state;
    size_t i;

    if (!st)
        return;
    for (i = 0; i < st->n_model; i++) {
        ckpt_close(st->model[i].ck);
        free(st->model[i].path);
    }
    for (i = 0; i < st->n_optim; i++) {
        ckpt_close(st->optim[i].ck);
        free(st->optim[i].path);
    }
    free(st->model);
    free(st->optim);
    free(st);
    *state = NULL;
}

/* The tag directory: <path>/<tag option> (any relative path, as in zero_to_fp32), else
 * what <path>/latest names, else <path> itself when it holds model-states files. */
static int tag_dir(ckpt_reader *r, char **dir)
{
    const char *path = ckpt_reader_path(r), *tag = ckpt_reader_options(r)->tag;
    size_t n_model, n_optim;
    int rc;

    *dir = NULL;
    if (tag && *tag) {
        if (!(*dir = join_path(path, tag)))
            return ckpt_error_oom();
        if (!is_dir(*dir))
            return ckpt_error_set(CKPT_ENOTFOUND, "%s: tag directory %s does not exist", path, *dir);
        return 0;
    }
    rc = read_latest(path, dir);
    if (rc == CKPT_ENOTFOUND) {
        rc = list_dir(path, NULL, NULL, &n_model, &n_optim);
        if (rc == 0 && n_model == 0)
            return ckpt_error_set(CKPT_ENOTFOUND, "%s: no 'latest' file and no *%s files (not a DeepSpeed "
                                  "checkpoint directory)", path, ZERO_MODEL_SUFFIX);
        if (rc == 0 && !(*dir = strdup(path)))
            return ckpt_error_oom();
    } else if (rc == 0 && !is_dir(*dir)) {
        return ckpt_error_set(CKPT_ENOTFOUND, "%s: tag directory %s named by 'latest' does not exist", path, *dir);
    }
    return rc;
}

/* Order files by model-parallel rank, keeping the natural order within each rank. */
static void sort_by_mp(ckpt_zero_file *v, size_t n)
{
    size_t i, j;

    for (i = 1; i < n; i++) {
        ckpt_zero_file x = v[i];
        for (j = i; j > 0 && v[j - 1].mp > x.mp; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* The files of model-parallel rank mp, a run of the sorted arrays. */
static ckpt_zero_state mp_view(const ckpt_zero_state *st, long long mp)
{
    ckpt_zero_state v = { NULL, NULL, 0, 0 };
    size_t i;

    for (i = 0; i < st->n_model; i++)
        if (st->model[i].mp == mp && v.n_model++ == 0)
            v.model = &st->model[i];
    for (i = 0; i < st->n_optim; i++)
        if (st->optim[i].mp == mp && v.n_optim++ == 0)
            v.optim = &st->optim[i];
    return v;
}

/* Consolidate the files of one model-parallel rank into b->root. */
static int open_mp(ckpt_zero_build *b, const ckpt_zero_state *v, const char *suffix_tag, int first)
{
    char kind[64];
    size_t i;
    int rc;

    for (i = 0; i < v->n_model; i++)
        if (!ckpt_zero__get(v->model[i].root, "buffer_names"))
            return ckpt_error_set(CKPT_EFORMAT, "%s is not a ZeRO model-states file (no buffer_names)",
                                  v->model[i].path);
    b->st = v;
    if (v->n_optim == 0)
        return ckpt_zero__stage0(b);
    if ((rc = zero_stage(b->r, b, &v->optim[0], first)) < 0)
        return rc;
    snprintf(kind, sizeof kind, "%s%s", suffix_tag, ZERO_OPTIM_SUFFIX);
    rc = check_ranks(b->dir, v->optim, v->n_optim, b->world, kind);
    if (rc >= 0 && b->stage == 3) {
        snprintf(kind, sizeof kind, "%s%s", suffix_tag, ZERO_MODEL_SUFFIX);
        rc = check_ranks(b->dir, v->model, v->n_model, b->world, kind);
    }
    return rc < 0 ? rc : ckpt_zero__merge(b);
}

/* Consolidate every model-parallel rank; with more than one, each state dict goes under
 * "mp_rank_MM" of the root. */
static int open_all(ckpt_reader *r, ckpt_zero_build *b, const ckpt_zero_state *st)
{
    ckpt_arena *a = ckpt_reader_arena(r);
    ckpt_value *top = NULL;
    long long mp;
    size_t i;
    int rc = 0, n_mp = 0;

    for (i = 0; i < st->n_model + st->n_optim; i++) {
        const ckpt_zero_file *f = i < st->n_model ? &st->model[i] : &st->optim[i - st->n_model];
        if (f->mp < 0 && (st->model[0].mp >= 0 || st->model[st->n_model - 1].mp >= 0))
            return ckpt_error_set(CKPT_EFORMAT, "%s: %s names no model-parallel rank (mp_rank_NN), other files do",
                                  b->dir, ckpt_zero__base(f->path));
    }
    for (i = 0; i < st->n_model; i++)
        n_mp += i == 0 || st->model[i].mp != st->model[i - 1].mp;
    if (n_mp > 1 && !(top = ckpt_value_new(a, CKPT_VAL_DICT)))
        return CKPT_ENOMEM;
    for (i = 0; i < st->n_model && rc >= 0; i++) {
        ckpt_zero_state v;
        char key[32], prefix[48], suffix[48];
        ckpt_value *k;
        mp = st->model[i].mp;
        if (i > 0 && mp == st->model[i - 1].mp)
            continue;
        v = mp_view(st, mp);
        snprintf(key, sizeof key, "mp_rank_%02lld", mp);
        prefix[0] = suffix[0] = '\0';
        if (n_mp > 1) {
            snprintf(prefix, sizeof prefix, "%s/", key);
            snprintf(suffix, sizeof suffix, "_%s", key);
        }
        b->prefix = prefix;
        rc = open_mp(b, &v, suffix, i == 0);
        if (rc >= 0 && n_mp > 1) {
            k = ckpt_value_new_str(a, key, strlen(key));
            rc = k ? ckpt_value_dict_set(a, top, k, b->root) : CKPT_ENOMEM;
        }
        b->prefix = "";
    }
    for (i = 0; i < st->n_optim && rc >= 0; i++)
        if (mp_view(st, st->optim[i].mp).n_model == 0)
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: %s has no model-states file of its model-parallel rank", b->dir,
                                ckpt_zero__base(st->optim[i].path));
    if (rc >= 0)
        ckpt_reader_set_root(r, n_mp > 1 ? top : b->root);
    return rc;
}

static int zero_open(ckpt_reader *r)
{
    zero_names model = { NULL, 0, 0 }, optim = { NULL, 0, 0 };
    ckpt_zero_build b;
    ckpt_zero_state *st;
    size_t n_model, n_optim;
    char *dir = NULL;
    int rc;

    memset(&b, 0, sizeof b);
    b.prefix = "";
    st = calloc(1, sizeof *st);
    if (!st)
        return ckpt_error_oom();
    *ckpt_reader_state(r) = st; /* the close hook frees it, whatever happens below */
    if ((rc = tag_dir(r, &dir)) < 0)
        goto done;
    rc = list_dir(dir, &model, &optim, &n_model, &n_optim);
    if (rc < 0)
        goto done;
    if (model.n == 0) {
        rc = ckpt_error_set(CKPT_ENOTFOUND, "%s: no *%s files", dir, ZERO_MODEL_SUFFIX);
        goto done;
    }
    rc = open_files(r, &model, &st->model, &st->n_model);
    if (rc >= 0)
        rc = open_files(r, &optim, &st->optim, &st->n_optim);
    if (rc < 0)
        goto done;
    sort_by_mp(st->model, st->n_model);
    sort_by_mp(st->optim, st->n_optim);
    b.r = r;
    b.dir = dir;
    rc = open_all(r, &b, st);
done:
    ckpt_zero__build_dispose(&b);
    zero_names_free(&model);
    zero_names_free(&optim);
    free(dir);
    return rc < 0 ? rc : 0;
}

extern const ckpt_format_vtable ckpt_format_deepspeed_zero;
const ckpt_format_vtable ckpt_format_deepspeed_zero = {
    .abi_version = CKPT_FORMAT_ABI_VERSION,
    .name = "deepspeed_zero",
    .description = "DeepSpeed ZeRO 1/2/3 checkpoint directory, read as zero_to_fp32's consolidated state dict",
    .extensions = "",
    .caps = CKPT_FORMAT_READ,
    .bid = zero_bid,
    .open = zero_open,
    .close = zero_close,
};
