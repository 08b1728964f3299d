/* The torch_dcp format: a Distributed Checkpoint (world size 2) read at global shapes over
 * tiled storages, chunks cut along either axis; bytes items kept; common.pt merged into the
 * root; hostile or damaged directories refused with the file named. Each fixture is read as
 * written by torch 2.10 and by torch 2.15, where megatron-core's `.metadata` also holds the
 * ranks' save plans. Checkpoints written by a plan (ckpt/dcp.h) read back the same, chunks
 * refused when they overlap or leave a gap. */
#include "test.h"

#include <ckpt/checkpoint.h>
#include <ckpt/dcp.h>
#include <ckpt/value.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static ckpt_ckpt *open_dir(const char *path)
{
    ckpt_ckpt *c = NULL;
    return ckpt_open(&c, path, NULL) < 0 ? NULL : c;
}

static int same_values(const ckpt_tensor *a, const ckpt_tensor *b)
{
    int64_t n = ckpt_tensor_numel(a);
    double *x = malloc((size_t)(n ? n : 1) * sizeof *x), *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    int same = x && y && n == ckpt_tensor_numel(b) && a->dtype == b->dtype &&
               ckpt_tensor_read(a, 0, n, CKPT_DTYPE_F64, x) == 0 && ckpt_tensor_read(b, 0, n, CKPT_DTYPE_F64, y) == 0 &&
               memcmp(x, y, (size_t)n * sizeof *x) == 0;
    free(x);
    free(y);
    return same;
}

static void global_tensors_from_both_ranks(const char *fixture)
{
    ckpt_ckpt *c = open_dir(ckpt_test_data(fixture));
    const ckpt_tensor *emb, *out, *counts, *step;
    int64_t got[10];
    float s;
    int i;

    ASSERT_TRUE(c != NULL);
    ASSERT_EQ_STR(ckpt_format_name(c), "torch_dcp");
    ASSERT_EQ_INT((int)ckpt_tensor_count(c), 8);
    emb = ckpt_tensor_find(c, "model.embed.weight");
    out = ckpt_tensor_find(c, "model.layers.0.attn.out.weight");
    counts = ckpt_tensor_find(c, "counts");
    step = ckpt_tensor_find(c, "optim.state.model.embed.weight.step");
    ASSERT_TRUE(emb && out && counts && step);
    /* 11 rows over two ranks: 6 + 5 */
    ASSERT_TRUE(emb->ndim == 2 && emb->shape[0] == 11 && emb->shape[1] == 6 && emb->dtype == CKPT_DTYPE_F32);
    ASSERT_TRUE(emb->storage->tiling && emb->storage->tiling->n_tiles == 2);
    ASSERT_EQ_INT((int)emb->storage->tiling->tiles[1].offset[0], 6);
    /* Shard(1): both chunks hold every row */
    ASSERT_TRUE(out->dtype == CKPT_DTYPE_BF16 && out->shape[0] == 6 && out->shape[1] == 8);
    ASSERT_EQ_INT((int)out->storage->tiling->tiles[1].offset[1], 4);
    ASSERT_OK(ckpt_tensor_read(counts, 0, 10, CKPT_DTYPE_I64, got));
    for (i = 0; i < 10; i++)
        ASSERT_EQ_INT((int)got[i], i);
    ASSERT_TRUE(step->ndim == 0);
    ASSERT_OK(ckpt_tensor_read(step, 0, 1, CKPT_DTYPE_F32, &s));
    ASSERT_TRUE(s == 3.0f);
    ckpt_close(c);
}

CKPT_TEST(test_torch_dcp_global_tensors_from_both_ranks)
{
    global_tensors_from_both_ranks("dcp");
    global_tensors_from_both_ranks("dcp215");
}

static void bytes_items_nest_as_saved(const char *fixture)
{
    ckpt_ckpt *c = open_dir(ckpt_test_data(fixture));
    const ckpt_value *train, *step;

    ASSERT_TRUE(c != NULL);
    /* planner_data puts "train.step" back under "train" */
    train = ckpt_value_dict_get(ckpt_root(c), "train");
    ASSERT_TRUE(train && train->kind == CKPT_VAL_DICT);
    step = ckpt_value_dict_get(train, "step");
    ASSERT_TRUE(step && step->kind == CKPT_VAL_BYTES && step->u.bytes.len > 4);
    ASSERT_TRUE(memcmp(step->u.bytes.ptr, "PK\003\004", 4) == 0); /* torch.save of the value */
    ckpt_close(c);
}

CKPT_TEST(test_torch_dcp_bytes_items_nest_as_saved)
{
    bytes_items_nest_as_saved("dcp");
    bytes_items_nest_as_saved("dcp215");
}

static void megatron_common_state_first(const char *fixture)
{
    ckpt_ckpt *c = open_dir(ckpt_test_data(fixture));
    const ckpt_value *root, *it;
    const ckpt_tensor *fc1;

    ASSERT_TRUE(c != NULL);
    root = ckpt_root(c);
    ASSERT_TRUE(root->u.dict.map.n > 0 && ckpt_value_is_str(root->u.dict.map.keys[0], "args"));
    it = ckpt_value_dict_get(root, "iteration");
    ASSERT_TRUE(it && it->kind == CKPT_VAL_INT && it->u.integer == 10);
    /* SwiGLU: gate and up of each layer and rank are chunks of their own */
    fc1 = ckpt_tensor_find(c, "decoder.layers.mlp.linear_fc1.weight");
    ASSERT_TRUE(fc1 && fc1->ndim == 3 && fc1->shape[0] == 4 && fc1->shape[1] == 192);
    ASSERT_EQ_INT((int)fc1->storage->tiling->n_tiles, 16);
    ckpt_close(c);
}

CKPT_TEST(test_torch_dcp_megatron_common_state_first)
{
    megatron_common_state_first("megatron/dist_tp2_bf16/iter_0000010");
    megatron_common_state_first("megatron/dist215_tp2/iter_0000010");
}

/* Overwrites the first `from` in buf[0..len) with `to` (as long), 0; -1 if absent. */
static int patch(unsigned char *buf, size_t len, const char *from, size_t from_len, const char *to)
{
    size_t i;

    for (i = 0; i + from_len <= len; i++) {
        if (memcmp(buf + i, from, from_len) == 0) {
            memcpy(buf + i, to, from_len);
            return 0;
        }
    }
    return -1;
}

/* megatron-core 0.16 under torch 2.15 adds the ranks' save plans to `.metadata`
 * (`all_local_plans`: SavePlan, WriteItem, WriteItemType, TensorWriteData): read as data and
 * skipped, the tensors are the torch 2.10 twin's. The same place naming another class, or
 * code, is refused. The pickle is edited in place, lengths kept: a name string is replaced
 * by a shorter one followed by NONE POP pairs, which leave the stack as it was. */
CKPT_TEST(test_torch_dcp_megatron_save_plans_are_data)
{
    static const char planner[] = "\x8c\x24torch.distributed.checkpoint.planner";
    static const char save_plan[] = "\x8c\x08SavePlan";
    ckpt_ckpt *old = open_dir(ckpt_test_data("megatron/dist_tp1/iter_0000010"));
    ckpt_ckpt *c = open_dir(ckpt_test_data("megatron/dist215_tp2/iter_0000010"));
    unsigned char *meta;
    size_t i, len;

    ASSERT_TRUE(old != NULL && c != NULL);
    ASSERT_EQ_INT((int)ckpt_tensor_count(c), (int)ckpt_tensor_count(old));
    for (i = 0; i < ckpt_tensor_count(old); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(old, i);
        ASSERT_TRUE(same_values(t, ckpt_tensor_find(c, t->name)));
    }
    ckpt_close(c);
    ckpt_close(old);

    ASSERT_OK(ckpt_test_copy_data_dir("megatron/dist215_tp2/iter_0000010", "load_plan"));
    meta = ckpt_test_read_file("load_plan/.metadata", &len);
    ASSERT_TRUE(meta != NULL && memmem(meta, len, "all_local_plans", 15) != NULL);
    /* the read side's plan is data too */
    ASSERT_TRUE(patch(meta, len, save_plan, sizeof save_plan - 1, "\x8c\x08LoadPlan") == 0);
    ckpt_test_write_file("load_plan/.metadata", meta, len);
    ASSERT_OK(ckpt_open(&c, "load_plan", NULL));
    ckpt_close(c);

    ASSERT_OK(ckpt_test_copy_data_dir("megatron/dist215_tp2/iter_0000010", "other_class"));
    ASSERT_TRUE(patch(meta, len, "\x8c\x08LoadPlan", 10, "\x8c\x08SavePlaX") == 0);
    ckpt_test_write_file("other_class/.metadata", meta, len);
    ASSERT_FAILS(CKPT_EUNSAFE, ckpt_open(&c, "other_class", NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message,
                       "torch.distributed.checkpoint.planner.SavePlaX (at (state)/all_local_plans/0/(callable))") != NULL);

    ASSERT_OK(ckpt_test_copy_data_dir("megatron/dist215_tp2/iter_0000010", "code"));
    ASSERT_TRUE(patch(meta, len, planner, sizeof planner - 1,
                      "\x8c\x02osN0N0N0N0N0N0N0N0N0N0N0N0N0N0N0N0N0") == 0);
    ASSERT_TRUE(patch(meta, len, "\x8c\x08SavePlaX", 10, "\x8c\x06systemN0") == 0);
    ckpt_test_write_file("code/.metadata", meta, len);
    free(meta);
    ASSERT_FAILS(CKPT_EUNSAFE, ckpt_open(&c, "code", NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "refers to os.system (at (state)/all_local_plans/0/(callable))") !=
                NULL);
}

CKPT_TEST(test_torch_dcp_refuses_hostile_metadata)
{
    ckpt_ckpt *c = NULL;

    ASSERT_FAILS(CKPT_EUNSAFE, ckpt_open(&c, ckpt_test_data("bad_dcp/unsafe_global"), NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "posix.system") != NULL);
    ASSERT_FAILS(CKPT_EUNSAFE, ckpt_open(&c, ckpt_test_data("bad_dcp/escaping_path"), NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "../../dcp/__0_0.distcp") != NULL);
}

CKPT_TEST(test_torch_dcp_names_a_damaged_data_file)
{
    ckpt_ckpt *c = NULL;
    unsigned char *data;
    size_t len;

    ASSERT_OK(ckpt_test_copy_data_dir("dcp", "short"));
    data = ckpt_test_read_file("short/__1_0.distcp", &len);
    ASSERT_TRUE(data != NULL && len > 9000);
    ckpt_test_write_file("short/__1_0.distcp", data, 9000);
    free(data);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "short", NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "short/__1_0.distcp") != NULL);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "truncated") != NULL);

    ASSERT_OK(ckpt_test_copy_data_dir("dcp", "missing"));
    ASSERT_TRUE(unlink("missing/__0_0.distcp") == 0);
    ASSERT_TRUE(ckpt_open(&c, "missing", NULL) < 0);
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "missing/__0_0.distcp") != NULL);
}

/* A metadata file cut short is named as such; the directory is still the format's (detected),
 * and the file given alone stands for its directory. */
CKPT_TEST(test_torch_dcp_names_truncated_metadata)
{
    ckpt_ckpt *c = NULL;

    ASSERT_OK(ckpt_test_copy_data_dir("dcp", "cut"));
    ckpt_test_write_file("cut/.metadata", "\x80\x04\x95", 3);
    ASSERT_EQ_STR(ckpt_format_detect("cut"), "torch_dcp");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "cut", NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "cut/.metadata: truncated or corrupt metadata: pickle:") != NULL);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, "cut/.metadata", NULL));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "cut/.metadata: truncated or corrupt metadata: pickle:") != NULL);
    ASSERT_OK(ckpt_open(&c, ckpt_test_data("dcp/.metadata"), NULL));
    ASSERT_EQ_STR(ckpt_format_name(c), "torch_dcp");
    ASSERT_TRUE(ckpt_tensor_count(c) > 0);
    ckpt_close(c);
    /* nothing recognises an empty directory, or a missing path */
    ASSERT_TRUE(mkdir("empty", 0700) == 0);
    ASSERT_TRUE(ckpt_format_detect("empty") == NULL);
    ASSERT_TRUE(ckpt_format_detect("no/such/path") == NULL);
    ASSERT_EQ_STR(ckpt_format_detect(ckpt_test_data("torch/basic.pt")), "torch");
}


/* The plain fixture cut again: rows 4 + 7 over two ranks, columns 3 + 5, one whole tensor,
 * a bytes item; written by a plan and read back. */
CKPT_TEST(test_torch_dcp_written_by_a_plan_reads_back)
{
    ckpt_ckpt *in = open_dir(ckpt_test_data("dcp")), *back = NULL;
    const ckpt_tensor *emb, *out, *counts;
    const ckpt_node *e, *o, *c, *part;
    const ckpt_value *train;
    ckpt_dcp_out *d = NULL;
    ckpt_plan *plan = NULL;
    ckpt_graph *g;
    int64_t off[2] = { 0, 0 };

    ASSERT_TRUE(in != NULL);
    emb = ckpt_tensor_find(in, "model.embed.weight");
    out = ckpt_tensor_find(in, "model.layers.0.attn.out.weight");
    counts = ckpt_tensor_find(in, "counts");
    ASSERT_OK(ckpt_plan_new(&plan));
    g = ckpt_plan_graph(plan);
    ASSERT_OK(ckpt_node_tensor(g, emb, &e));
    ASSERT_OK(ckpt_node_tensor(g, out, &o));
    ASSERT_OK(ckpt_node_tensor(g, counts, &c));
    ASSERT_OK(ckpt_dcp_out_new(&d, plan, "step_1"));
    ASSERT_OK(ckpt_node_slice(g, e, 0, 0, 4, &part));
    ASSERT_OK(ckpt_dcp_out_chunk(d, "emb", 2, emb->shape, off, part, 0));
    off[0] = 4;
    ASSERT_OK(ckpt_node_slice(g, e, 0, 4, 7, &part));
    ASSERT_OK(ckpt_dcp_out_chunk(d, "emb", 2, emb->shape, off, part, 1));
    off[0] = 0;
    ASSERT_OK(ckpt_node_slice(g, o, 1, 0, 3, &part));
    ASSERT_OK(ckpt_dcp_out_chunk(d, "out", 2, out->shape, off, part, 1));
    off[1] = 3;
    ASSERT_OK(ckpt_node_slice(g, o, 1, 3, 5, &part));
    ASSERT_OK(ckpt_dcp_out_chunk(d, "out", 2, out->shape, off, part, 0));
    off[1] = 0;
    ASSERT_OK(ckpt_dcp_out_chunk(d, "counts", 1, counts->shape, off, c, 0));
    ASSERT_OK(ckpt_dcp_out_bytes(d, "train.step", "saved", 5, 1));
    ASSERT_OK(ckpt_dcp_out_finish(d));
    ckpt_dcp_out_free(d);
    ASSERT_OK(ckpt_plan_execute(plan, "written", NULL, NULL));
    ckpt_plan_free(plan);

    back = open_dir("written/step_1");
    ASSERT_TRUE(back != NULL);
    ASSERT_EQ_INT((int)ckpt_tensor_count(back), 3);
    ASSERT_TRUE(same_values(ckpt_tensor_find(back, "emb"), emb));
    ASSERT_TRUE(same_values(ckpt_tensor_find(back, "out"), out));
    ASSERT_TRUE(same_values(ckpt_tensor_find(back, "counts"), counts));
    ASSERT_EQ_INT((int)ckpt_tensor_find(back, "out")->storage->tiling->n_tiles, 2);
    train = ckpt_value_dict_get(ckpt_root(back), "train.step");
    ASSERT_TRUE(train && train->kind == CKPT_VAL_BYTES && train->u.bytes.len == 5 &&
                memcmp(train->u.bytes.ptr, "saved", 5) == 0);
    ckpt_close(back);
    ckpt_close(in);
}

CKPT_TEST(test_torch_dcp_plan_refuses_gaps_and_overlaps)
{
    ckpt_plan *plan = NULL;
    ckpt_dcp_out *d = NULL;
    const ckpt_node *z;
    int64_t shape[1] = { 10 }, part[1] = { 6 }, off[1] = { 0 };

    ASSERT_OK(ckpt_plan_new(&plan));
    ASSERT_OK(ckpt_node_zeros(ckpt_plan_graph(plan), CKPT_DTYPE_F32, 1, part, &z));
    ASSERT_OK(ckpt_dcp_out_new(&d, plan, ""));
    ASSERT_OK(ckpt_dcp_out_chunk(d, "x", 1, shape, off, z, 0));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_dcp_out_finish(d)); /* rows 6..9 missing */
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "6 of its 10") != NULL);
    off[0] = 4;
    ASSERT_OK(ckpt_dcp_out_chunk(d, "x", 1, shape, off, z, 1));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_dcp_out_finish(d));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "overlap") != NULL);
    off[0] = 5;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_dcp_out_chunk(d, "x", 1, shape, off, z, 1)); /* past the end */
    ckpt_dcp_out_free(d);
    ckpt_plan_free(plan);
}
