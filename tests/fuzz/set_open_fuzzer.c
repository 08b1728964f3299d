/* Hostile checkpoint directories: a small Megatron (legacy torch and torch_dist), PaddleNLP
 * or Distributed Checkpoint directory from testdata, its member files and metadata mutated,
 * opened as the commands open them: as one checkpoint (inspect, convert) with every tensor
 * read, and as a set whose model is read and planned for another layout (reshard --dry-run:
 * the plan described, nothing written). Must never crash, hang or leak: a clean error or
 * success.
 *
 * The input: byte 0 picks the template, byte 1 the target (TP 1, 2, 4 or 8; PP 1 or 2;
 * torch_dist or not; optimizer kept or dropped), then mutations, each an operation byte, a
 * file byte (an index into the template's files, sorted by path) and its arguments:
 *   0 overwrite: offset (3 bytes, modulo the size), n, n bytes
 *   1 truncate: length (3 bytes, modulo the size + 1)
 *   2 delete the file
 *   3 insert: offset (3 bytes), n, n bytes
 *   4 replace the value of the k-th ':' of a JSON or text file (up to ',', '}', ']' or a
 *     line end): k, n, n bytes
 *   5 append: n, n bytes
 * The directory is written afresh for each input in a private temporary directory (under
 * /dev/shm where there is one). */
#include <ckpt.h>

#include "fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>

#ifndef CKPT_TESTDATA_DIR
#error "the templates come from the repository's testdata (CKPT_TESTDATA_DIR)"
#endif

#define MAX_FILES 32
#define MAX_PATH 512

typedef struct tfile {
    char rel[MAX_PATH];
    uint8_t *data;
    size_t size;
    int deleted;
} tfile;

typedef struct tmpl {
    const char *dir; /* under testdata */
    tfile files[MAX_FILES];
    size_t n_files;
} tmpl;

static tmpl templates[] = {
    { "megatron/tp2_bf16", { { "", NULL, 0, 0 } }, 0 },
    { "megatron/dist_tp2_bf16", { { "", NULL, 0, 0 } }, 0 },
    { "paddlenlp/fp32_tp2", { { "", NULL, 0, 0 } }, 0 },
    { "dcp", { { "", NULL, 0, 0 } }, 0 },
};
#define N_TEMPLATES (sizeof templates / sizeof templates[0])

static char work[MAX_PATH];
static tmpl *loading;
static size_t loading_root;

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data;
    long n;

    FUZZ_ASSERT(f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0);
    data = malloc(n ? (size_t)n : 1);
    FUZZ_ASSERT(data && fread(data, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return data;
}

/* The checkpoint's files: all but the fixtures' expected results. */
static int add_template_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    tfile *t;

    (void)st;
    (void)ftw;
    if (type != FTW_F || strcmp(path + strlen(path) - strlen("expected.json"), "expected.json") == 0)
        return 0;
    FUZZ_ASSERT(loading->n_files < MAX_FILES && strlen(path + loading_root) < MAX_PATH);
    t = &loading->files[loading->n_files++];
    snprintf(t->rel, sizeof t->rel, "%s", path + loading_root);
    t->data = read_all(path, &t->size);
    return 0;
}

static int by_rel(const void *a, const void *b)
{
    return strcmp(((const tfile *)a)->rel, ((const tfile *)b)->rel);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    return ftw->level == 0 ? 0 : remove(path);
}

static void clear_work(void)
{
    nftw(work, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void remove_work(void)
{
    clear_work();
    rmdir(work);
}

static void setup(void)
{
    struct stat st;
    size_t i;

    ckpt_zstd__set_input_limit(FUZZ_ZSTD_LIMIT);
    snprintf(work, sizeof work, "%s/ckpt-fuzz-set-XXXXXX",
             stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    FUZZ_ASSERT(mkdtemp(work));
    atexit(remove_work);
    for (i = 0; i < N_TEMPLATES; i++) {
        char root[MAX_PATH];
        snprintf(root, sizeof root, "%s/%s", CKPT_TESTDATA_DIR, templates[i].dir);
        loading = &templates[i];
        loading_root = strlen(root) + 1;
        FUZZ_ASSERT(nftw(root, add_template_file, 16, FTW_PHYS) == 0 && loading->n_files > 0);
        qsort(loading->files, loading->n_files, sizeof *loading->files, by_rel);
    }
}

/* ---- the mutated copy ---- */

typedef struct reader {
    const uint8_t *p;
    size_t left;
} reader;

static unsigned take(reader *r, size_t bytes)
{
    unsigned v = 0;

    while (bytes-- > 0 && r->left > 0) {
        v = v << 8 | *r->p++;
        r->left--;
    }
    return v;
}

static const uint8_t *take_bytes(reader *r, size_t *n)
{
    const uint8_t *p;

    *n = take(r, 1) % 64;
    p = r->p;
    if (*n > r->left)
        *n = r->left;
    r->p += *n;
    r->left -= *n;
    return p;
}

/* Replace [at, at + len) of f with the n bytes of p. */
static void replace_bytes(tfile *f, size_t at, size_t len, const uint8_t *p, size_t n)
{
    uint8_t *grown = malloc(f->size - len + n + 1);

    FUZZ_ASSERT(grown && at + len <= f->size);
    memcpy(grown, f->data, at);
    memcpy(grown + at, p, n);
    memcpy(grown + at + n, f->data + at + len, f->size - at - len);
    free(f->data);
    f->data = grown;
    f->size = f->size - len + n;
}

/* The k-th ':' (modulo their number) and the value after it. */
static void edit_field(tfile *f, unsigned k, const uint8_t *p, size_t n)
{
    size_t i, colons = 0, at, end;

    for (i = 0; i < f->size; i++)
        colons += f->data[i] == ':';
    if (!colons)
        return;
    k %= (unsigned)colons;
    for (at = 0;; at++)
        if (f->data[at] == ':' && k-- == 0)
            break;
    for (end = ++at; end < f->size && !strchr(",}]\n", f->data[end]); end++)
        ;
    replace_bytes(f, at, end - at, p, n);
}

static void mutate(tfile *files, size_t n_files, reader *r)
{
    while (r->left >= 2) {
        unsigned op = take(r, 1) % 6;
        tfile *f = &files[take(r, 1) % n_files];
        size_t n, at;
        const uint8_t *p;
        unsigned k;

        switch (op) {
        case 0:
            at = f->size ? take(r, 3) % f->size : 0;
            p = take_bytes(r, &n);
            if (n > f->size - at)
                n = f->size - at;
            memcpy(f->data + at, p, n);
            break;
        case 1:
            f->size = take(r, 3) % (f->size + 1);
            break;
        case 2:
            f->deleted = 1;
            break;
        case 3:
            at = take(r, 3) % (f->size + 1);
            p = take_bytes(r, &n);
            replace_bytes(f, at, 0, p, n);
            break;
        case 4:
            k = take(r, 1);
            p = take_bytes(r, &n);
            edit_field(f, k, p, n);
            break;
        default:
            p = take_bytes(r, &n);
            replace_bytes(f, f->size, 0, p, n);
            break;
        }
    }
}

static void put_file(const tfile *t)
{
    char path[2 * MAX_PATH], *slash;
    size_t done = 0;
    int fd, len = snprintf(path, sizeof path, "%s/%s", work, t->rel);

    FUZZ_ASSERT(len > 0 && (size_t)len < sizeof path);
    for (slash = strchr(path + strlen(work) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        FUZZ_ASSERT(mkdir(path, 0700) == 0 || errno == EEXIST);
        *slash = '/';
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FUZZ_ASSERT(fd >= 0);
    while (done < t->size) {
        ssize_t n = write(fd, t->data + done, t->size - done);
        FUZZ_ASSERT(n > 0);
        done += (size_t)n;
    }
    close(fd);
}

/* ---- what the commands do with it ---- */

static void failed(int rc)
{
    FUZZ_ASSERT(rc < 0 && ckpt_error_last()->message[0] != '\0');
}

/* inspect and convert: one checkpoint, every tensor read. */
static void open_whole(const char *path)
{
    ckpt_ckpt *c = NULL;
    int rc;

    (void)ckpt_format_detect(path);
    if ((rc = ckpt_open(&c, path, NULL)) < 0) {
        failed(rc);
        return;
    }
    fuzz_read_tensors(c);
    ckpt_close(c);
}

static void describe(const ckpt_plan *plan)
{
    ckpt_buf b = CKPT_BUF_INIT;
    int rc = ckpt_plan_describe(plan, 1, &b);

    if (rc < 0)
        failed(rc);
    ckpt_buf_dispose(&b);
}

static void plan_megatron(ckpt_set *set, int tp, int pp, int dist, int drop_optimizer)
{
    ckpt_megatron_options mo = CKPT_MEGATRON_OPTIONS_INIT;
    ckpt_megatron_target t = CKPT_MEGATRON_TARGET_INIT;
    ckpt_plan *plan = NULL;
    ckpt_megatron *m = NULL;
    size_t i;
    int rc;

    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = ckpt_megatron_open(&m, set, ckpt_plan_graph(plan), &mo)) < 0) {
        failed(rc);
        goto done;
    }
    for (i = 0; i < ckpt_megatron_tensor_count(m); i++) {
        const ckpt_node *full;
        ckpt_tensor_layout layout;
        FUZZ_ASSERT(ckpt_megatron_tensor_at(m, i, &full, &layout) != NULL);
        (void)ckpt_megatron_tensor_shards(m, i);
    }
    t.tp = tp;
    t.pp = pp;
    t.optimizer = drop_optimizer || dist ? CKPT_MEGATRON_OPTIM_DROP : CKPT_MEGATRON_OPTIM_KEEP;
    if ((rc = dist ? ckpt_megatron_plan_dist(m, &t, plan) : ckpt_megatron_plan(m, &t, plan)) < 0)
        failed(rc);
    else
        describe(plan);
done:
    ckpt_megatron_close(m);
    ckpt_plan_free(plan);
}

static void plan_paddle(ckpt_set *set, int tp, int pp, int drop_optimizer)
{
    ckpt_paddle_model_options mo = CKPT_PADDLE_MODEL_OPTIONS_INIT;
    ckpt_paddle_target t = CKPT_PADDLE_TARGET_INIT;
    ckpt_plan *plan = NULL;
    ckpt_paddle_model *m = NULL;
    size_t i;
    int rc;

    mo.no_optimizer = drop_optimizer;
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = ckpt_paddle_model_open(&m, set, ckpt_plan_graph(plan), &mo)) < 0) {
        failed(rc);
        goto done;
    }
    for (i = 0; i < ckpt_paddle_model_tensor_count(m); i++) {
        const ckpt_node *full;
        ckpt_tensor_layout layout;
        FUZZ_ASSERT(ckpt_paddle_model_tensor_at(m, i, &full, &layout) != NULL);
    }
    t.tp = tp;
    t.pp = pp;
    t.drop_optimizer = drop_optimizer;
    if ((rc = ckpt_paddle_plan(m, &t, plan)) < 0)
        failed(rc);
    else
        describe(plan);
done:
    ckpt_paddle_model_close(m);
    ckpt_plan_free(plan);
}

/* inspect of a set, and reshard --dry-run. */
static void open_set(const char *path, unsigned target)
{
    int tp = 1 << (target & 3), pp = 1 + (target >> 2 & 1), dist = target >> 3 & 1, drop = target >> 4 & 1;
    ckpt_set *set = NULL;
    const char *layout;
    size_t i;
    int rc;

    if ((rc = ckpt_set_open(&set, path, NULL)) < 0) {
        failed(rc);
        return;
    }
    for (i = 0; i < ckpt_set_member_count(set); i++) {
        const ckpt_member *mb = ckpt_set_member_at(set, i);
        FUZZ_ASSERT(mb && mb->rel && mb->path && mb->role);
    }
    (void)ckpt_set_input_size(set);
    layout = ckpt_set_info_of(set)->layout;
    if (strcmp(layout, "megatron") == 0)
        plan_megatron(set, tp, pp, dist, drop);
    else if (strcmp(layout, "paddle") == 0)
        plan_paddle(set, tp, pp, drop);
    ckpt_set_close(set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfile files[MAX_FILES];
    const tmpl *t;
    reader r = { data, size };
    unsigned target;
    size_t i;

    if (!work[0])
        setup();
    if (size < 2)
        return 0;
    t = &templates[take(&r, 1) % N_TEMPLATES];
    target = take(&r, 1);
    for (i = 0; i < t->n_files; i++) {
        files[i] = t->files[i];
        FUZZ_ASSERT((files[i].data = malloc(t->files[i].size + 1)));
        memcpy(files[i].data, t->files[i].data, t->files[i].size);
    }
    mutate(files, t->n_files, &r);
    clear_work();
    for (i = 0; i < t->n_files; i++)
        if (!files[i].deleted)
            put_file(&files[i]);
    open_whole(work);
    /* a Distributed Checkpoint inside a set's directory (torch_dist) is one checkpoint too */
    for (i = 0; i < t->n_files; i++) {
        const char *base = strrchr(files[i].rel, '/');
        if (base && strcmp(base, "/.metadata") == 0) {
            char dir[2 * MAX_PATH];
            int len = snprintf(dir, sizeof dir, "%s/%.*s", work, (int)(base - files[i].rel), files[i].rel);
            FUZZ_ASSERT(len > 0 && (size_t)len < sizeof dir);
            open_whole(dir);
        }
    }
    open_set(work, target);
    for (i = 0; i < t->n_files; i++)
        free(files[i].data);
    return 0;
}
