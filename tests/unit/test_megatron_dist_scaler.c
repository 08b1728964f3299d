/* The fp16 grad scaler's state (formats/megatron/optimizer/megatron_dist_scaler.c) of megatron-core's own saves
 * (testdata/megatron/distopt/f_tp1pp1dp3_fp16_inst3: scale 1024, growth_tracker 1,
 * hysteresis_tracker 2): found in legacy model_optim_rng.pt and in dp_reshardable's saved
 * objects alike, written as a saved object with its tensor and read back, and a saved object
 * with a tensor a scaler does not hold refused. Every form's round trip runs in
 * tests/cli/reshard/distopt_fp16_inst.sh. */
#include "test.h"

#include "../../formats/megatron/optimizer/megatron_dist_optim.h"

#include <ckpt/dcp.h>

#define SCALER_KEY CKPT_MEGATRON_DIST_PREFIX "dp_group_idx_0.grad_scaler/shard_0_1"

typedef struct opened {
    ckpt_set *set;
    ckpt_plan *plan;
    ckpt_megatron *m;
} opened;

static int open_form(opened *o, const char *form)
{
    char path[256];
    int rc;

    memset(o, 0, sizeof *o);
    snprintf(path, sizeof path, "megatron/distopt/f_tp1pp1dp3_fp16_inst3/%s", form);
    if ((rc = ckpt_set_open(&o->set, ckpt_test_data(path), NULL)) < 0 || (rc = ckpt_plan_new(&o->plan)) < 0)
        return rc;
    return ckpt_megatron_open(&o->m, o->set, ckpt_plan_graph(o->plan), NULL);
}

static void close_form(opened *o)
{
    ckpt_megatron_close(o->m);
    ckpt_plan_free(o->plan);
    ckpt_set_close(o->set);
}

static int64_t int_at(const ckpt_value *d, const char *key)
{
    const ckpt_value *v = ckpt_value_dict_get(d, key);
    return v && v->kind == CKPT_VAL_INT ? v->u.integer : -1;
}

/* {'scale': tensor([1024.]), 'growth_tracker': 1, 'hysteresis_tracker': 2} */
static int is_the_fixtures(const ckpt_megatron *m, const ckpt_value *v)
{
    const ckpt_value *scale = v && v->kind == CKPT_VAL_DICT ? ckpt_value_dict_get(v, "scale") : NULL;
    const ckpt_node *x;
    float f = 0;

    if (!scale || scale->kind != CKPT_VAL_TENSOR || scale->u.tensor.index >= m->n_scaler_nodes)
        return 0;
    x = m->scaler_nodes[scale->u.tensor.index];
    return ckpt_node_dtype(x) == CKPT_DTYPE_F32 && ckpt_node_ndim(x) == 1 && ckpt_node_numel(x) == 1 &&
           ckpt_node_read(x, 0, 1, CKPT_DTYPE_F32, &f) == 0 && f == 1024.0f && int_at(v, "growth_tracker") == 1 &&
           int_at(v, "hysteresis_tracker") == 2;
}

CKPT_TEST(test_scaler_of_legacy_and_dp_reshardable)
{
    static const char *const forms[] = { "legacy", "dp_reshardable" };
    size_t i;

    for (i = 0; i < 2; i++) {
        opened o;
        const ckpt_value *v = NULL;
        ASSERT_OK(open_form(&o, forms[i]));
        ASSERT_OK(ckpt_megatron__dist_scaler(o.m, &v));
        ASSERT_TRUE(is_the_fixtures(o.m, v));
        close_form(&o);
    }
}

/* root {SCALER_KEY: bytes} in arena a */
static ckpt_value *root_with(ckpt_arena *a, const ckpt_buf *bytes)
{
    ckpt_value *root = ckpt_value_new(a, CKPT_VAL_DICT), *b = ckpt_value_new(a, CKPT_VAL_BYTES);

    if (!root || !b)
        return NULL;
    b->u.bytes.ptr = bytes->data;
    b->u.bytes.len = bytes->len;
    b->u.bytes.decoded_len = bytes->len;
    return ckpt_value_dict_set(a, root, ckpt_value_new_str(a, SCALER_KEY, strlen(SCALER_KEY)), b) < 0 ? NULL : root;
}

CKPT_TEST(test_scaler_saved_object_reads_back)
{
    opened src, dst;
    const ckpt_value *v = NULL, *back = NULL;
    ckpt_value *list, *root;
    ckpt_arena *a;
    ckpt_buf bytes = CKPT_BUF_INIT;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(open_form(&src, "legacy"));
    ASSERT_OK(ckpt_megatron__dist_scaler(src.m, &v));
    ASSERT_TRUE((list = ckpt_value_new(a, CKPT_VAL_LIST)) != NULL);
    ASSERT_OK(ckpt_value_append(a, list, (ckpt_value *)v));
    ASSERT_OK(ckpt_megatron__scaler_object(src.m, list, &bytes));
    ASSERT_TRUE((root = root_with(a, &bytes)) != NULL);
    ASSERT_OK(open_form(&dst, "dp_reshardable"));
    ASSERT_OK(ckpt_megatron__read_dp_scaler(dst.m, root));
    ASSERT_OK(ckpt_megatron__dist_scaler(dst.m, &back));
    ASSERT_TRUE(back != v && is_the_fixtures(dst.m, back));
    close_form(&dst);
    close_form(&src);
    ckpt_buf_dispose(&bytes);
    ckpt_arena_free(a);
}

/* A saved object whose tensor has two elements, or that is not a list of one value. */
CKPT_TEST(test_scaler_saved_object_refused)
{
    opened o;
    ckpt_arena *a;
    ckpt_graph *g;
    const ckpt_node *two;
    ckpt_value *list, *d, *root, *bare;
    ckpt_buf bytes = CKPT_BUF_INIT, bare_bytes = CKPT_BUF_INIT;
    int64_t shape = 2;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_graph_new(&g));
    ASSERT_OK(ckpt_node_full(g, CKPT_DTYPE_F32, 1, &shape, 2.0, &two));
    ASSERT_TRUE((list = ckpt_value_new(a, CKPT_VAL_LIST)) != NULL && (d = ckpt_value_new(a, CKPT_VAL_DICT)) != NULL);
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_str(a, "scale", 5), ckpt_value_new_tensor(a, 0)));
    ASSERT_OK(ckpt_value_append(a, list, d));
    ASSERT_OK(ckpt_dcp_saved_value_tensors(list, &two, 1, &bytes));
    ASSERT_TRUE((root = root_with(a, &bytes)) != NULL);
    ASSERT_OK(open_form(&o, "dp_reshardable"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_megatron__read_dp_scaler(o.m, root));
    ASSERT_TRUE(strstr(ckpt_error_last()->message, "2 elements") != NULL);
    ASSERT_TRUE((bare = ckpt_value_new_int(a, 7)) != NULL);
    ASSERT_OK(ckpt_dcp_saved_value(bare, &bare_bytes));
    ASSERT_TRUE((root = root_with(a, &bare_bytes)) != NULL);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_megatron__read_dp_scaler(o.m, root));
    close_form(&o);
    ckpt_buf_dispose(&bytes);
    ckpt_buf_dispose(&bare_bytes);
    ckpt_graph_free(g);
    ckpt_arena_free(a);
}
