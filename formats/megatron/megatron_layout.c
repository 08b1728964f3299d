/* Megatron-LM's legacy checkpoint directories (--ckpt-format torch):
 *
 *   <root>/latest_checkpointed_iteration.txt       "10" or "release"
 *   <root>/iter_0000010/mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt
 *                                             /distrib_optim.pt (distributed optimizer)
 *
 * `_PPP` is there iff the pipeline has more than one stage, `_EEE` iff expert parallelism
 * has more than one rank; a name with one suffix is therefore ambiguous, and the first
 * rank's `args` says which it is. The path may also be an iteration directory itself, or
 * the one rank file of a TP 1 PP 1 checkpoint (any name: `torch.save` of Megatron's dict).
 *
 * An iteration directory written with --ckpt-format torch_dist (a PyTorch Distributed
 * Checkpoint: `.metadata`, `__R_S.distcp`, `common.pt`) is one member, role "dist", read
 * whole at global shapes by the torch_dcp format: its layout lives in its chunks. */
#include <ckpt/sys/layout.h>
#include <ckpt/value.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TRACKER "latest_checkpointed_iteration.txt"
#define MODEL_FILE "model_optim_rng.pt"
#define DISTRIB_FILE "distrib_optim.pt"
#define DCP_METADATA ".metadata"

static int is_file(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return 0;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int has_rank_dirs(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;

    if (!d)
        return 0;
    while (!found && (e = readdir(d)))
        found = strncmp(e->d_name, "mp_rank_", 8) == 0;
    closedir(d);
    return found;
}

static int count_rank_dirs(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;

    if (!d)
        return 0;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, "mp_rank_", 8) == 0;
    closedir(d);
    return n;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int megatron_bid(const char *path, int is_dir)
{
    /* a file: only a weak guess from its name, the reader decides */
    if (!is_dir)
        return ends_with(path, "/" MODEL_FILE) || strcmp(path, MODEL_FILE) == 0 ? 40 : ends_with(path, ".pt") ? 8 : -1;
    if (is_file(path, TRACKER))
        return 64;
    return has_rank_dirs(path) || (is_file(path, DCP_METADATA) && is_file(path, "common.pt")) ? 48 : -1;
}

/* "mp_rank_01", "mp_rank_01_002", "mp_rank_01_002_003": how many numbers, and their values. */
static int parse_rank_dir(const char *name, int nums[3])
{
    const char *p = name + 8;
    int n = 0;

    if (strncmp(name, "mp_rank_", 8) != 0)
        return 0;
    while (n < 3) {
        char *end;
        long v;
        if (!isdigit((unsigned char)*p))
            return 0;
        v = strtol(p, &end, 10);
        if (v < 0 || v > 1000000)
            return 0;
        nums[n++] = (int)v;
        if (*end == '\0')
            return n;
        if (*end != '_')
            return 0;
        p = end + 1;
    }
    return 0;
}

static int read_tracker(const char *root, int64_t *iteration, int *release)
{
    char path[4096], text[64];
    FILE *f;
    size_t n;
    char *end, *s = text;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", root, TRACKER) >= sizeof path)
        return ckpt_error_set(CKPT_EINVALID, "%s: path too long", root);
    f = fopen(path, "r");
    if (!f)
        return ckpt_error_set(CKPT_EIO, "%s: %s", path, strerror(errno));
    n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    while (isspace((unsigned char)*s))
        s++;
    while (n && isspace((unsigned char)text[n - 1]))
        text[--n] = '\0';
    if (strcmp(s, "release") == 0) {
        *release = 1;
        *iteration = 0;
        return 0;
    }
    errno = 0;
    *iteration = strtoll(s, &end, 10);
    if (!*s || *end || errno || *iteration < 0)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                               "%s: '%s' is neither an iteration number nor 'release'", path, s);
    *release = 0;
    return 0;
}

/* Which directory under root holds the rank directories. */
static int pick_dir(const char *root, const ckpt_set_options *o, ckpt_set_info *info, char *dir, size_t cap)
{
    const char *base = strrchr(root, '/');
    int rc;

    base = base ? base + 1 : root;
    if ((has_rank_dirs(root) || is_file(root, DCP_METADATA)) && !is_file(root, TRACKER)) {
        /* an iteration directory itself */
        dir[0] = '\0';
        if (strcmp(base, "release") == 0) {
            info->release = 1;
            info->iteration = 0;
        } else if (sscanf(base, "iter_%" SCNd64, &info->iteration) != 1) {
            info->iteration = -1;
        }
        return 0;
    }
    if (o->iteration >= 0) {
        info->iteration = o->iteration;
        info->release = 0;
    } else if ((rc = read_tracker(root, &info->iteration, &info->release)) < 0) {
        return rc;
    }
    if ((size_t)(info->release ? snprintf(dir, cap, "release")
                               : snprintf(dir, cap, "iter_%07lld", (long long)info->iteration)) >= cap)
        return ckpt_error_set(CKPT_EINVALID, "iteration %lld out of range", (long long)info->iteration);
    return 0;
}

/* The parallel sizes the args of a rank file give (0 where absent), read only to tell what
 * its directory names mean: one number after the TP rank is the pipeline stage unless the
 * pipeline has one stage and experts are spread over ranks, and an expert TP size below the
 * TP leaves some (TP, EP) pairs without a file. */
typedef struct rank_args {
    long long tp, pp, ep, etp;
} rank_args;

static long long args_int(const ckpt_value *d, const char *name)
{
    const ckpt_value *v = ckpt_value_dict_get(d, name);
    return v && v->kind == CKPT_VAL_INT ? v->u.integer : 0;
}

static void read_rank_args(const char *rank_dir, rank_args *a)
{
    char path[4096];
    const ckpt_value *args;
    ckpt_ckpt *ck;

    memset(a, 0, sizeof *a);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", rank_dir, MODEL_FILE) >= sizeof path ||
        ckpt_open(&ck, path, NULL) < 0) {
        ckpt_error_clear();
        return;
    }
    args = ckpt_root(ck) ? ckpt_value_dict_get(ckpt_root(ck), "args") : NULL;
    if (args && args->kind == CKPT_VAL_OBJECT && args->u.obj.state && args->u.obj.state->kind == CKPT_VAL_DICT) {
        a->tp = args_int(args->u.obj.state, "tensor_model_parallel_size");
        a->pp = args_int(args->u.obj.state, "pipeline_model_parallel_size");
        a->ep = args_int(args->u.obj.state, "expert_model_parallel_size");
        a->etp = args_int(args->u.obj.state, "expert_tensor_parallel_size");
    }
    ckpt_close(ck);
}

/* Expert TP below the TP (dividing it): megatron-core's legacy save is written by the ranks of
 * expert data-parallel rank 0, the first ETP x EP of each stage (megatron-core 0.16.1
 * parallel_state: rank r has dense TP rank r % TP, EP rank r / ETP), so only the (TP, EP)
 * pairs with tp / ETP == ep % (TP / ETP) have a file; and every dense TP rank only when
 * ETP x EP >= TP. */
static int expert_tp_set(const rank_args *a)
{
    return a->tp > 1 && a->ep > 1 && a->etp >= 1 && a->etp < a->tp && a->tp % a->etp == 0 && a->etp * a->ep >= a->tp &&
           a->tp <= 1000 && a->ep <= 4096 && a->pp >= 1 && a->pp <= 1000;
}

static int expert_tp_has(const rank_args *a, const ckpt_coords *at)
{
    return at->tp < a->tp && at->pp < a->pp && at->ep < a->ep && at->tp / a->etp == at->ep % (a->tp / a->etp);
}

typedef struct rank_dir {
    char name[256];
    ckpt_coords at;
} rank_dir;

static int list_rank_dirs(const char *path, rank_dir **out, size_t *n_out)
{
    DIR *d = opendir(path);
    struct dirent *e;
    rank_dir *dirs = NULL;
    size_t n = 0, cap = 0;

    if (!d)
        return ckpt_error_setc(errno == ENOENT ? CKPT_ENOTFOUND : CKPT_EIO, CKPT_ERRCLASS_LAYOUT, "%s: %s", path,
                               strerror(errno));
    while ((e = readdir(d))) {
        int nums[3], k = parse_rank_dir(e->d_name, nums);
        ckpt_coords at = CKPT_COORDS_NONE;
        if (!k || strlen(e->d_name) >= sizeof dirs->name)
            continue;
        if (n == cap) {
            rank_dir *grown = realloc(dirs, (cap = cap ? 2 * cap : 16) * sizeof *grown);
            if (!grown) {
                free(dirs);
                closedir(d);
                return ckpt_error_oom();
            }
            dirs = grown;
        }
        at.tp = nums[0];
        at.pp = k >= 2 ? nums[1] : 0;
        at.ep = k == 3 ? nums[2] : 0;
        snprintf(dirs[n].name, sizeof dirs[n].name, "%s", e->d_name);
        dirs[n++].at = at;
    }
    closedir(d);
    *out = dirs;
    *n_out = n;
    return 0;
}

static int by_coords(const void *a, const void *b)
{
    const ckpt_coords *x = &((const rank_dir *)a)->at, *y = &((const rank_dir *)b)->at;
    if (x->pp != y->pp)
        return x->pp - y->pp;
    if (x->ep != y->ep)
        return x->ep - y->ep;
    return x->tp - y->tp;
}

/* The first rank directory of TP x PP x EP that is not there; dirs sorted by_coords, no two
 * the same rank, fewer than TP x PP x EP. Found by walking the coordinates in order, which
 * meets a gap within n + 1 steps: nothing is allocated for the sizes the names claim. */
static int missing_rank(const char *path, const rank_dir *dirs, size_t n, int tp, int pp, int ep)
{
    rank_dir want;
    size_t i = 0;

    memset(&want, 0, sizeof want);
    for (want.at.pp = 0; want.at.pp < pp; want.at.pp++)
        for (want.at.ep = 0; want.at.ep < ep; want.at.ep++)
            for (want.at.tp = 0; want.at.tp < tp; want.at.tp++, i++) {
                int k = snprintf(want.name, sizeof want.name, "mp_rank_%02d", want.at.tp);
                if (i < n && by_coords(&dirs[i], &want) == 0)
                    continue;
                if (pp > 1)
                    k += snprintf(want.name + k, sizeof want.name - (size_t)k, "_%03d", want.at.pp);
                if (ep > 1)
                    snprintf(want.name + k, sizeof want.name - (size_t)k, "_%03d", want.at.ep);
                return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                       "%s: no %s: %zu rank directories where TP %d x PP %d x EP %d need %llu", path,
                                       want.name, n, tp, pp, ep, (unsigned long long)tp * pp * ep);
            }
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: %zu rank directories for TP %d x PP %d x EP %d",
                           path, n, tp, pp, ep);
}

static void name_rank(char *buf, size_t cap, const ckpt_coords *at, int pp, int ep)
{
    int k = snprintf(buf, cap, "mp_rank_%02d", at->tp);

    if (pp > 1)
        k += snprintf(buf + k, cap - (size_t)k, "_%03d", at->pp);
    if (ep > 1)
        snprintf(buf + k, cap - (size_t)k, "_%03d", at->ep);
}

/* dirs (sorted by_coords, no two the same rank) are exactly the files of an expert-TP set
 * (expert_tp_set): none extra, none missing. */
static int check_expert_tp_set(const char *path, const rank_dir *dirs, size_t n, const rank_args *a)
{
    ckpt_coords at = CKPT_COORDS_NONE;
    char name[64];
    size_t i = 0;

    for (i = 0; i < n; i++)
        if (!expert_tp_has(a, &dirs[i].at))
            return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT,
                                   "%s: %s is no rank of TP %lld x PP %lld x EP %lld at expert TP %lld: megatron-core "
                                   "saves only the TP ranks of expert data-parallel rank 0, mp_rank_TT_EEE with "
                                   "TT / ETP == EEE %% (TP / ETP)",
                                   path, dirs[i].name, a->tp, a->pp, a->ep, a->etp);
    i = 0;
    for (at.pp = 0; at.pp < a->pp; at.pp++)
        for (at.ep = 0; at.ep < a->ep; at.ep++)
            for (at.tp = 0; at.tp < a->tp; at.tp++) {
                if (!expert_tp_has(a, &at))
                    continue;
                if (i < n && dirs[i].at.tp == at.tp && dirs[i].at.pp == at.pp && dirs[i].at.ep == at.ep) {
                    i++;
                    continue;
                }
                name_rank(name, sizeof name, &at, (int)a->pp, (int)a->ep);
                return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT,
                                       "%s: no %s: TP %lld x PP %lld x EP %lld at expert TP %lld (args) is saved as "
                                       "%lld rank directories, %zu found",
                                       path, name, a->tp, a->pp, a->ep, a->etp, a->etp * a->ep * a->pp, n);
            }
    return 0;
}

static int add_member(ckpt_set_builder *b, const char *dir, const char *rank_name, const char *file,
                      const ckpt_coords *at, const char *role)
{
    char rel[4096];
    int n = *dir ? snprintf(rel, sizeof rel, "%s/%s/%s", dir, rank_name, file)
                 : snprintf(rel, sizeof rel, "%s/%s", rank_name, file);

    if (n < 0 || (size_t)n >= sizeof rel)
        return ckpt_error_set(CKPT_EINVALID, "%s/%s: path too long", dir, rank_name);
    return ckpt_set_builder_add(b, rel, at, role);
}

/* One file on its own, of a checkpoint with one rank. The rank file of a larger checkpoint
 * is refused: alone it is a part, not a model. */
static int list_file(ckpt_set_builder *b, const char *path)
{
    char dir[4096], parent[4096];
    const char *slash = strrchr(path, '/'), *rank;
    ckpt_set_info info;
    ckpt_coords at = { 0, 0, 0, -1, -1 };
    int n;

    if ((size_t)snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".") >= sizeof dir)
        return ckpt_error_set(CKPT_EINVALID, "%s: path too long", path);
    rank = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    if (strncmp(rank, "mp_rank_", 8) == 0 && snprintf(parent, sizeof parent, "%s/..", dir) < (int)sizeof parent &&
        (n = count_rank_dirs(parent)) > 1)
        return ckpt_error_setc(CKPT_EINVALID, CKPT_ERRCLASS_LAYOUT,
                               "%s is the file of one of %d ranks: give the checkpoint root (the directory of "
                               "latest_checkpointed_iteration.txt) or the iteration directory",
                               path, n);
    memset(&info, 0, sizeof info);
    info.root = dir;
    info.dir = "";
    info.iteration = -1;
    info.tp = info.pp = info.ep = info.dp = 1;
    if ((n = ckpt_set_builder_info(b, &info)) < 0)
        return n;
    return ckpt_set_builder_add(b, slash ? slash + 1 : path, &at, "model");
}

static int megatron_list(ckpt_set_builder *b, const char *root)
{
    ckpt_set_info info;
    char dir[64], path[4096], rel[4096];
    rank_dir *dirs = NULL;
    size_t i, n = 0;
    int rc, tp = 0, pp = 0, ep = 0, single = 1, distrib = 0, has;
    rank_args args;
    struct stat st;

    if (stat(root, &st) == 0 && S_ISREG(st.st_mode))
        return list_file(b, root);
    memset(&info, 0, sizeof info);
    info.root = root;
    info.iteration = -1;
    if ((rc = pick_dir(root, ckpt_set_builder_options(b), &info, dir, sizeof dir)) < 0)
        return rc;
    info.dir = dir;
    if ((size_t)snprintf(path, sizeof path, *dir ? "%s/%s" : "%s", root, dir) >= sizeof path - 300)
        return ckpt_error_set(CKPT_EINVALID, "%s: path too long", root);
    if (is_file(path, DCP_METADATA) && !has_rank_dirs(path)) {
        ckpt_coords at = { 0, 0, 0, -1, -1 };
        info.tp = info.pp = info.ep = info.dp = 1;
        if ((rc = ckpt_set_builder_info(b, &info)) < 0)
            return rc;
        return ckpt_set_builder_add(b, *dir ? dir : ".", &at, "dist");
    }
    if ((rc = list_rank_dirs(path, &dirs, &n)) < 0)
        return rc;
    if (n == 0) {
        free(dirs);
        return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT, "%s: no mp_rank_* directories", path);
    }
    for (i = 0; i < n; i++)
        single &= strchr(dirs[i].name + 8, '_') != NULL && strchr(strchr(dirs[i].name + 8, '_') + 1, '_') == NULL;
    memset(&args, 0, sizeof args);
    if ((size_t)snprintf(rel, sizeof rel, "%s/%s", path, dirs[0].name) >= sizeof rel)
        rel[0] = '\0';
    if (single && rel[0])
        read_rank_args(rel, &args);
    if (single && args.pp == 1 && args.ep > 1)
        for (i = 0; i < n; i++) {
            dirs[i].at.ep = dirs[i].at.pp;
            dirs[i].at.pp = 0;
        }
    qsort(dirs, n, sizeof *dirs, by_coords);
    for (i = 0; i < n; i++) {
        tp = dirs[i].at.tp + 1 > tp ? dirs[i].at.tp + 1 : tp;
        pp = dirs[i].at.pp + 1 > pp ? dirs[i].at.pp + 1 : pp;
        ep = dirs[i].at.ep + 1 > ep ? dirs[i].at.ep + 1 : ep;
    }
    info.tp = tp;
    info.pp = pp;
    info.ep = ep;
    info.dp = 1;
    if (!single && rel[0] && (uint64_t)tp * (uint64_t)pp * (uint64_t)ep != n)
        read_rank_args(rel, &args);
    rc = ckpt_set_builder_info(b, &info);
    for (i = 1; i < n && rc == 0; i++)
        if (by_coords(&dirs[i - 1], &dirs[i]) == 0)
            rc = ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_LAYOUT, "%s: %s and %s are the same rank", path,
                                 dirs[i - 1].name, dirs[i].name);
    if (rc == 0 && expert_tp_set(&args)) {
        rc = check_expert_tp_set(path, dirs, n, &args);
        info.tp = (int)args.tp;
        info.pp = (int)args.pp;
        info.ep = (int)args.ep;
        if (rc == 0)
            rc = ckpt_set_builder_info(b, &info);
    } else if (rc == 0 && (uint64_t)tp * (uint64_t)pp * (uint64_t)ep != n) {
        rc = missing_rank(path, dirs, n, tp, pp, ep);
    }
    for (i = 0; i < n && rc == 0; i++) {
        char sub[4096];
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, dirs[i].name) >= sizeof sub) {
            rc = ckpt_error_set(CKPT_EINVALID, "%s: path too long", path);
            break;
        }
        if (!is_file(sub, MODEL_FILE)) {
            rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT, "%s: no %s (incomplete checkpoint?)", sub,
                                 MODEL_FILE);
            break;
        }
        rc = add_member(b, dir, dirs[i].name, MODEL_FILE, &dirs[i].at, "model");
        /* the distributed optimizer's state is cut over every rank: all of them have a part */
        has = is_file(sub, DISTRIB_FILE);
        distrib = i == 0 ? has : distrib;
        if (rc == 0 && has != distrib)
            rc = ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_LAYOUT, "%s/%s: no " DISTRIB_FILE ", but %s has one",
                                 path, has ? dirs[0].name : dirs[i].name, has ? dirs[i].name : dirs[0].name);
        if (rc == 0 && has)
            rc = add_member(b, dir, dirs[i].name, DISTRIB_FILE, &dirs[i].at, "distrib_optim");
    }
    free(dirs);
    return rc;
}

const ckpt_layout_vtable ckpt_layout_megatron = {
    CKPT_LAYOUT_ABI_VERSION,
    "megatron",
    "Megatron-LM legacy checkpoint (latest_checkpointed_iteration.txt, iter_NNNNNNN/mp_rank_TT[_PPP][_EEE]/)",
    megatron_bid,
    megatron_list,
};
