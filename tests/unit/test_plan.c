/* Plans over many output files: what they hold, how they print, and that executing one
 * writes every file into a directory that appears whole or not at all. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A plan of four files from testdata/torch/basic.pt: every tensor into a torch file with a
 * value tree of our own, the first one into safetensors, a text file and a copy. */
static int make_plan(ckpt_plan **out, const ckpt_ckpt **in_out, ckpt_ckpt *in)
{
    ckpt_plan *p;
    ckpt_arena *a;
    ckpt_value *root, *model;
    size_t f, st, i, index;
    int rc;

    *in_out = in;
    if ((rc = ckpt_plan_new(&p)) < 0)
        return rc;
    a = ckpt_plan_arena(p);
    root = ckpt_value_new(a, CKPT_VAL_DICT);
    model = ckpt_value_new(a, CKPT_VAL_DICT);
    if ((rc = ckpt_plan_add_file(p, "ranks/mp_rank_00/model.pt", NULL, &f)) < 0 ||
        (rc = ckpt_plan_add_file(p, "first.safetensors", "st", &st)) < 0)
        goto fail;
    for (i = 0; i < ckpt_tensor_count(in); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(in, i);
        const ckpt_node *node;
        if ((rc = ckpt_node_tensor(ckpt_plan_graph(p), t, &node)) < 0 ||
            (rc = ckpt_plan_add_tensor(p, f, t->name, node, 0, &index)) < 0 ||
            (rc = ckpt_value_dict_set(a, model, ckpt_value_new_str(a, t->name, strlen(t->name)),
                                      ckpt_value_new_tensor(a, index))) < 0)
            goto fail;
        if (i == 0 && (rc = ckpt_plan_add_tensor(p, st, "first", node, 0, NULL)) < 0)
            goto fail;
    }
    if ((rc = ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "iteration", 9), ckpt_value_new_int(a, 7))) < 0 ||
        (rc = ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "model", 5), model)) < 0 ||
        (rc = ckpt_plan_set_root(p, f, root)) < 0 ||
        (rc = ckpt_plan_add_bytes(p, "latest.txt", "10", 2)) < 0 ||
        (rc = ckpt_plan_add_copy(p, "copy/basic.pt", ckpt_test_data("torch/basic.pt"))) < 0)
        goto fail;
    *out = p;
    return 0;
fail:
    ckpt_plan_free(p);
    return rc;
}

CKPT_TEST(test_plan_lists_files_and_tensors)
{
    ckpt_ckpt *in;
    const ckpt_ckpt *src;
    ckpt_plan *p;
    const ckpt_plan_file *f;
    ckpt_buf text = CKPT_BUF_INIT;

    ASSERT_OK(ckpt_open(&in, ckpt_test_data("torch/basic.pt"), NULL));
    ASSERT_OK(make_plan(&p, &src, in));
    ASSERT_EQ_INT(ckpt_plan_file_count(p), 4);
    f = ckpt_plan_file_at(p, 0);
    ASSERT_EQ_STR(f->format, "torch");
    ASSERT_EQ_INT(f->kind, CKPT_PLAN_TENSORS);
    ASSERT_EQ_INT(f->n_tensors, ckpt_tensor_count(in));
    f = ckpt_plan_file_at(p, 1);
    ASSERT_EQ_STR(f->format, "safetensors");
    ASSERT_EQ_INT(f->n_tensors, 1);
    ASSERT_EQ_INT(ckpt_plan_file_at(p, 2)->kind, CKPT_PLAN_BYTES);
    ASSERT_EQ_INT(ckpt_plan_file_at(p, 2)->tensor_bytes, 2);
    ASSERT_EQ_INT(ckpt_plan_file_at(p, 3)->kind, CKPT_PLAN_COPY);
    ASSERT_TRUE(ckpt_plan_file_at(p, 4) == NULL);
    ASSERT_EQ_STR(ckpt_plan_tensor_at(p, 1, 0, NULL, NULL), "first");
    ASSERT_OK(ckpt_plan_describe(p, 1, &text));
    ASSERT_TRUE(strstr((const char *)text.data, "ranks/mp_rank_00/model.pt (torch, ") != NULL);
    ASSERT_TRUE(strstr((const char *)text.data, "  first ") != NULL);
    ASSERT_TRUE(strstr((const char *)text.data, "latest.txt (2 bytes)") != NULL);
    ckpt_buf_dispose(&text);
    ckpt_plan_free(p);
    ckpt_close(in);
}

CKPT_TEST(test_plan_refuses_bad_files)
{
    ckpt_plan *p;
    size_t f;

    ASSERT_OK(ckpt_plan_new(&p));
    ASSERT_OK(ckpt_plan_add_file(p, "a.safetensors", NULL, &f));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_add_file(p, "a.safetensors", NULL, &f));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_add_bytes(p, "/abs.txt", "x", 1));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_add_file(p, "b.unknown", NULL, &f));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_plan_add_file(p, "b.x", "no-such-format", &f));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_plan_set_root(p, 0, NULL));
    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_plan_add_copy(p, "c", "no/such/file"));
    ckpt_plan_free(p);
}

CKPT_TEST(test_plan_execute_writes_every_file)
{
    ckpt_ckpt *in, *back;
    const ckpt_ckpt *src;
    ckpt_plan *p;
    ckpt_plan_report rep;
    const ckpt_value *it;
    size_t len, i;
    unsigned char *text;

    ASSERT_OK(ckpt_open(&in, ckpt_test_data("torch/basic.pt"), NULL));
    ASSERT_OK(make_plan(&p, &src, in));
    ASSERT_OK(ckpt_plan_execute(p, "out", NULL, &rep));
    ASSERT_EQ_INT(rep.files, 4);
    ASSERT_TRUE(rep.bytes_written > 0);
    ckpt_plan_report_dispose(&rep);
    text = ckpt_test_read_file("out/latest.txt", &len);
    ASSERT_TRUE(text && len == 2 && memcmp(text, "10", 2) == 0);
    free(text);
    ASSERT_TRUE(exists("out/copy/basic.pt"));
    ASSERT_TRUE(exists("out/first.safetensors"));

    /* the torch file holds our value tree and every tensor, bit for bit */
    ASSERT_OK(ckpt_open(&back, "out/ranks/mp_rank_00/model.pt", NULL));
    it = ckpt_value_dict_get(ckpt_root(back), "iteration");
    ASSERT_TRUE(it && it->kind == CKPT_VAL_INT && it->u.integer == 7);
    ASSERT_EQ_INT(ckpt_tensor_count(back), ckpt_tensor_count(in));
    for (i = 0; i < ckpt_tensor_count(in); i++) {
        const ckpt_tensor *a = ckpt_tensor_at(in, i);
        char name[256];
        const ckpt_tensor *b;
        uint64_t n = ckpt_tensor_nbytes(a);
        unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
        snprintf(name, sizeof name, "model/%s", a->name);
        b = ckpt_tensor_find(back, name);
        ASSERT_TRUE(b != NULL);
        ASSERT_OK(ckpt_tensor_read(a, 0, ckpt_tensor_numel(a), a->dtype, x));
        ASSERT_OK(ckpt_tensor_read(b, 0, ckpt_tensor_numel(b), b->dtype, y));
        ASSERT_TRUE(memcmp(x, y, n) == 0);
        free(x);
        free(y);
    }
    ckpt_close(back);
    ckpt_plan_free(p);
    ckpt_close(in);
}

CKPT_TEST(test_plan_failure_leaves_nothing)
{
    ckpt_plan *p;

    ASSERT_OK(ckpt_plan_new(&p));
    ASSERT_OK(ckpt_plan_add_bytes(p, "a.txt", "a", 1));
    ckpt_test_write_file("gone.bin", "abc", 3);
    ASSERT_OK(ckpt_plan_add_copy(p, "b.bin", "gone.bin"));
    ASSERT_TRUE(unlink("gone.bin") == 0);
    ASSERT_TRUE(ckpt_plan_execute(p, "out", NULL, NULL) < 0);
    ASSERT_TRUE(!exists("out"));
    ckpt_plan_free(p);
}

/* Progress counts bytes over the whole plan and ends at the total. */
typedef struct progress_seen {
    uint64_t last, total;
    int calls;
} progress_seen;

static void on_progress(uint64_t done, uint64_t total, void *payload)
{
    progress_seen *s = payload;
    s->last = done;
    s->total = total;
    s->calls++;
}

CKPT_TEST(test_plan_progress_spans_the_plan)
{
    ckpt_ckpt *in;
    const ckpt_ckpt *src;
    ckpt_plan *p;
    ckpt_plan_options o = CKPT_PLAN_OPTIONS_INIT;
    progress_seen seen = { 0, 0, 0 };

    ASSERT_OK(ckpt_open(&in, ckpt_test_data("torch/basic.pt"), NULL));
    ASSERT_OK(make_plan(&p, &src, in));
    o.convert.progress = on_progress;
    o.convert.progress_payload = &seen;
    ASSERT_OK(ckpt_plan_execute(p, "out", &o, NULL));
    ASSERT_TRUE(seen.calls > 0);
    ASSERT_EQ_INT(seen.total, ckpt_plan_total_bytes(p));
    ckpt_plan_free(p);
    ckpt_close(in);
}
