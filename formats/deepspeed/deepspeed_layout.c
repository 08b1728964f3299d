/* DeepSpeed checkpoint directories (engine.save_checkpoint):
 *
 *   <root>/latest                                             the tag: "global_step100"
 *   <root>/<tag>/mp_rank_NN_model_states.pt                   ZeRO 0-2: module and buffers, one
 *                                                             per model-parallel rank
 *   <root>/<tag>/zero_pp_rank_R_mp_rank_NN_model_states.pt    ZeRO 3: one per data-parallel rank
 *   <root>/<tag>/[bf16_]zero_pp_rank_R_mp_rank_NN_optim_states.pt
 *                                                             each data-parallel rank's partitions
 *
 * Members are the model-states files (role "model") and the optimizer-state files (role
 * "optimizer") with tp = NN and dp = R (-1 for a model-states file that all data-parallel
 * ranks share), model-parallel rank by rank. The tag is the open options' tag, else
 * global_step<iteration> for an iteration asked for, else what `latest` names; the path
 * may also be a tag directory itself. Reading the tensors is the deepspeed_zero format's
 * job (ckpt_open on the directory): this module only names the files. */
#include <ckpt/sys/common.h>
#include <ckpt/sys/layout.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MODEL_SUFFIX "_model_states.pt"
#define OPTIM_SUFFIX "_optim_states.pt"
#define TAG_MAX 4096

typedef struct ds_file {
    char *name;
    ckpt_coords at;
    int optim;
} ds_file;

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && memcmp(s + n - m, suffix, m) == 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* N of "<key>N_" in a file name, or -1. */
static int number_after(const char *name, const char *key)
{
    const char *s = strstr(name, key);
    long v;
    char *end;

    if (!s || !isdigit((unsigned char)s[strlen(key)]))
        return -1;
    v = strtol(s + strlen(key), &end, 10);
    return *end == '_' && v <= 1000000 ? (int)v : -1;
}

/* The tag `latest` in dir names, whitespace stripped, into tag[cap]; CKPT_ENOTFOUND when
 * there is no such file. */
static int read_latest(const char *dir, char *tag, size_t cap)
{
    char path[4096], buf[TAG_MAX + 1];
    size_t n, start = 0;
    FILE *f;

    if ((size_t)snprintf(path, sizeof path, "%s/latest", dir) >= sizeof path)
        return ckpt_error_set(CKPT_EINVALID, "%s: path too long", dir);
    if (!(f = fopen(path, "rb")))
        return CKPT_ENOTFOUND;
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    while (n && isspace((unsigned char)buf[n - 1]))
        n--;
    while (start < n && isspace((unsigned char)buf[start]))
        start++;
    if (n > TAG_MAX || start == n || memchr(buf + start, '\0', n - start) || n - start >= cap)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: 'latest' does not name a tag", dir);
    memcpy(tag, buf + start, n - start);
    tag[n - start] = '\0';
    return 0;
}

/* The *_model_states.pt and *_optim_states.pt files of dir (not dot files, as a glob would
 * skip them), with their ranks; with out NULL, only how many model-states files there are. */
static int list_files(const char *dir, ds_file **out, size_t *n_out, size_t *n_model)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    ds_file *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    *n_model = 0;
    if (!d)
        return ckpt_error_setc(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_LAYOUT, "%s: %s", dir,
                               strerror(errno));
    while (rc == 0 && (e = readdir(d))) {
        int optim = has_suffix(e->d_name, OPTIM_SUFFIX);
        ckpt_coords at = CKPT_COORDS_NONE;
        if (e->d_name[0] == '.' || (!optim && !has_suffix(e->d_name, MODEL_SUFFIX)))
            continue;
        *n_model += !optim;
        if (!out)
            continue;
        if (n == cap) {
            ds_file *grown = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof *grown);
            if (!grown) {
                rc = ckpt_error_oom();
                break;
            }
            v = grown;
        }
        at.tp = number_after(e->d_name, "mp_rank_");
        at.dp = number_after(e->d_name, "zero_pp_rank_");
        v[n].optim = optim;
        v[n].at = at;
        if (!(v[n].name = strdup(e->d_name)))
            rc = ckpt_error_oom();
        else
            n++;
    }
    closedir(d);
    if (out) {
        *out = v;
        *n_out = n;
    }
    return rc;
}

static void files_free(ds_file *v, size_t n)
{
    while (n)
        free(v[--n].name);
    free(v);
}

/* Model-parallel rank, then model states before optimizer states, then data-parallel rank. */
static int by_rank(const void *pa, const void *pb)
{
    const ds_file *a = pa, *b = pb;

    if (a->at.tp != b->at.tp)
        return a->at.tp - b->at.tp;
    if (a->optim != b->optim)
        return a->optim - b->optim;
    return a->at.dp - b->at.dp;
}

static int deepspeed_bid(const char *path, int is_dir_path)
{
    char tag[TAG_MAX + 1], dir[8192];
    size_t n_model = 0;
    int bid = -1;

    if (!is_dir_path)
        return -1;
    if (read_latest(path, tag, sizeof tag) == 0)
        /* above Megatron's tracker: Megatron-DeepSpeed writes both, and its files are
         * DeepSpeed's; a tag without files still says whose directory this is */
        bid = (size_t)snprintf(dir, sizeof dir, "%s/%s", path, tag) < sizeof dir &&
                      list_files(dir, NULL, NULL, &n_model) == 0 && n_model > 0
                  ? 72
                  : 40;
    /* above Megatron's bid on entries named mp_rank_* */
    else if (list_files(path, NULL, NULL, &n_model) == 0 && n_model > 0)
        bid = 56;
    ckpt_error_clear();
    return bid;
}

/* N of the last component "global_stepN" of a tag or a tag directory, else -1. */
static int64_t tag_iteration(const char *path)
{
    size_t n = strlen(path), start;
    int64_t it;
    int end = 0;

    while (n > 1 && path[n - 1] == '/')
        n--;
    for (start = n; start > 0 && path[start - 1] != '/'; start--)
        ;
    if (sscanf(path + start, "global_step%" SCNd64 "%n", &it, &end) != 1 || start + (size_t)end != n || it < 0)
        return -1;
    return it;
}

/* The tag directory under root, "" when root is one itself. */
static int pick_tag(const char *root, const ckpt_set_options *o, char *tag, size_t cap)
{
    char dir[8192];
    size_t n_model = 0;
    int rc;

    if (o->open.tag && *o->open.tag)
        rc = (size_t)snprintf(tag, cap, "%s", o->open.tag) < cap
                 ? 0
                 : ckpt_error_set(CKPT_EINVALID, "%s: tag %.64s... too long", root, o->open.tag);
    else if (o->iteration >= 0)
        rc = (size_t)snprintf(tag, cap, "global_step%lld", (long long)o->iteration) < cap
                 ? 0
                 : ckpt_error_set(CKPT_EINVALID, "%s: iteration %lld out of range", root, (long long)o->iteration);
    else if ((rc = read_latest(root, tag, cap)) == CKPT_ENOTFOUND) {
        tag[0] = '\0';
        if ((rc = list_files(root, NULL, NULL, &n_model)) == 0 && n_model == 0)
            return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                   "%s: no 'latest' file and no *%s files (not a DeepSpeed checkpoint directory)",
                                   root, MODEL_SUFFIX);
        return rc;
    }
    if (rc < 0)
        return rc;
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, tag) >= sizeof dir || !is_dir(dir))
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT, "%s: tag directory %s does not exist", root, tag);
    return 0;
}

/* Every file names its ranks, and no rank of a kind is missing or there twice: per
 * model-parallel rank, the same W optimizer-state files zero_pp_rank_0 .. W-1, and one
 * model-states file, or (ZeRO 3) one per data-parallel rank. */
static int check_ranks(const char *dir, const ds_file *v, size_t n)
{
    size_t i, start;
    int world = -1;

    for (i = 0; i < n; i++) {
        if ((v[i].at.tp < 0) != (v[0].at.tp < 0))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: %s names no model-parallel rank (mp_rank_NN), %s does", dir,
                                   v[i].at.tp < 0 ? v[i].name : v[0].name, v[i].at.tp < 0 ? v[0].name : v[i].name);
        if (v[i].optim && v[i].at.dp < 0)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: %s names no data-parallel rank (zero_pp_rank_N)", dir, v[i].name);
        if (i > 0 && by_rank(&v[i - 1], &v[i]) == 0)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: %s and %s are the same rank", dir,
                                   v[i - 1].name, v[i].name);
    }
    for (start = 0; start < n; start = i) {
        int n_model = 0, n_optim = 0, shared = 0;
        for (i = start; i < n && v[i].at.tp == v[start].at.tp; i++) {
            int *count = v[i].optim ? &n_optim : &n_model;
            shared |= !v[i].optim && v[i].at.dp < 0;
            if (v[i].at.dp >= 0 && v[i].at.dp != *count)
                return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: zero_pp_rank_%d missing before %s",
                                       dir, *count, v[i].name);
            ++*count;
        }
        if (n_model == 0)
            return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                   "%s: no model-states file of model-parallel rank %d beside %s", dir,
                                   v[start].at.tp, v[start].name);
        if (!shared && n_optim && n_model != n_optim)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: %d model-states and %d optimizer-state files of model-parallel rank %d", dir,
                                   n_model, n_optim, v[start].at.tp);
        if (world >= 0 && n_optim != world)
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: %d optimizer-state files of model-parallel rank %d, %d of rank %d", dir,
                                   n_optim, v[start].at.tp, world, v[0].at.tp);
        world = n_optim;
    }
    return 0;
}

static int deepspeed_list(ckpt_set_builder *b, const char *root)
{
    char tag[TAG_MAX + 1], dir[8192], rel[8192];
    ckpt_set_info info;
    ds_file *v = NULL;
    size_t n = 0, n_model = 0, i;
    int rc;

    if ((rc = pick_tag(root, ckpt_set_builder_options(b), tag, sizeof tag)) < 0)
        return rc;
    if ((size_t)snprintf(dir, sizeof dir, *tag ? "%s/%s" : "%s", root, tag) >= sizeof dir)
        return ckpt_error_set(CKPT_EINVALID, "%s: path too long", root);
    if ((rc = list_files(dir, &v, &n, &n_model)) == 0 && n_model == 0)
        rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT, "%s: no *%s files", dir, MODEL_SUFFIX);
    if (rc == 0) {
        qsort(v, n, sizeof *v, by_rank);
        rc = check_ranks(dir, v, n);
    }
    memset(&info, 0, sizeof info);
    info.root = root;
    info.dir = tag;
    info.iteration = tag_iteration(*tag ? tag : root);
    if (rc == 0)
        rc = ckpt_set_builder_info(b, &info);
    for (i = 0; i < n && rc == 0; i++) {
        if ((size_t)snprintf(rel, sizeof rel, *tag ? "%s/%s" : "%s%s", tag, v[i].name) >= sizeof rel)
            rc = ckpt_error_set(CKPT_EINVALID, "%s/%s: path too long", dir, v[i].name);
        else
            rc = ckpt_set_builder_add(b, rel, &v[i].at, v[i].optim ? "optimizer" : "model");
    }
    files_free(v, n);
    return rc;
}

const ckpt_layout_vtable ckpt_layout_deepspeed = {
    .abi_version = CKPT_LAYOUT_ABI_VERSION,
    .name = "deepspeed",
    .description = "DeepSpeed checkpoint directory (latest, <tag>/[zero_pp_rank_R_]mp_rank_NN_model_states.pt, "
                   "*_optim_states.pt)",
    .bid = deepspeed_bid,
    .list = deepspeed_list,
};
