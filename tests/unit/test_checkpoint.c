/* The engine's open path: format bidding, forced formats, naming, lookups, globals,
 * and every torch fixture against the description torch itself wrote next to it. */
#include "test.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ckpt_ckpt *open_fixture(const char *rel, const char *format)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;

    o.format = format;
    if (ckpt_open(&c, ckpt_test_data(rel), &o) < 0)
        return NULL;
    return c;
}

CKPT_TEST(test_checkpoint_detects_each_format)
{
    static const struct { const char *path, *format; } cases[] = {
        { "torch/basic.pt", "torch" },
        { "torch/legacy.pt", "torch" },
        { "paddle/fp32.pdparams", "pdparams" },
        { "paddle/bf16_p2.pdparams", "pdparams" },
        { "safetensors/all_dtypes.safetensors", "safetensors" },
        { "safetensors/sharded", "safetensors" },
        { "zero/stage2_bf16_ws2", "deepspeed_zero" },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_ckpt *c = open_fixture(cases[i].path, NULL);
        ASSERT_TRUE(c != NULL);
        ASSERT_EQ_STR(ckpt_format_name(c), cases[i].format);
        ASSERT_TRUE(ckpt_tensor_count(c) > 0);
        ASSERT_TRUE(ckpt_input_size(c) > 0);
        ckpt_close(c);
    }
}

CKPT_TEST(test_checkpoint_errors_name_the_path)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    ckpt_ckpt *c = NULL;

    ASSERT_FAILS(CKPT_ENOTFOUND, ckpt_open(&c, "does-not-exist.pt", NULL));
    ASSERT_ERROR_MENTIONS("does-not-exist.pt");
    /* a symbolic link loop says so: it is there, but cannot be followed */
    ASSERT_TRUE(symlink("loop", "loop") == 0);
    ASSERT_FAILS(CKPT_EIO, ckpt_open(&c, "loop", NULL));
    ASSERT_ERROR_MENTIONS("loop: Too many levels of symbolic links");
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_open(&c, ckpt_test_data("bad/not_a_checkpoint.txt"), NULL));
    ASSERT_ERROR_MENTIONS("not_a_checkpoint.txt: unrecognized checkpoint format");
    o.format = "nonsense";
    ASSERT_FAILS(CKPT_EINVALID, ckpt_open(&c, ckpt_test_data("torch/basic.pt"), &o));
    ASSERT_ERROR_MENTIONS("nonsense");
    ASSERT_EQ_INT(ckpt_error_last()->klass, CKPT_ERRCLASS_ARGUMENT);
    o.format = "safetensors";
    ASSERT_TRUE(ckpt_open(&c, ckpt_test_data("torch/basic.pt"), &o) < 0);
    ASSERT_ERROR_MENTIONS("basic.pt");
    o.version = 99;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_open(&c, ckpt_test_data("torch/basic.pt"), &o));
    ASSERT_TRUE(c == NULL);
}

CKPT_TEST(test_checkpoint_names_nested_tensors_by_key_path)
{
    ckpt_ckpt *c = open_fixture("torch/megatron.pt", NULL);
    const ckpt_tensor *t;

    ASSERT_TRUE(c != NULL);
    t = ckpt_tensor_find(c, "model/decoder.layers.0.mlp.linear_fc1.weight");
    ASSERT_TRUE(t != NULL);
    ASSERT_EQ_INT(t->dtype, CKPT_DTYPE_BF16);
    ASSERT_TRUE(ckpt_tensor_find(c, "optimizer/optimizer/state/0/exp_avg") != NULL);
    ASSERT_TRUE(ckpt_tensor_find(c, "model/no.such.weight") == NULL);
    ckpt_close(c);

    c = open_fixture("torch/params.pt", NULL);
    ASSERT_TRUE(c != NULL);
    ASSERT_TRUE(ckpt_tensor_find(c, "nested/list/0/1") != NULL);
    ASSERT_TRUE(ckpt_tensor_find(c, "nested/tuple/1/0") != NULL);
    t = ckpt_tensor_find(c, "weight");
    ASSERT_TRUE(t != NULL && (t->flags & CKPT_TENSOR_PARAMETER));
    ckpt_close(c);
}

CKPT_TEST(test_checkpoint_lists_globals_and_marks_unsafe_ones)
{
    ckpt_ckpt *c = open_fixture("torch/unsafe_os_system.pt", NULL);
    size_t i, unsafe = 0;

    ASSERT_TRUE(c != NULL);
    for (i = 0; i < ckpt_global_count(c); i++) {
        const ckpt_global_ref *g = ckpt_global_at(c, i);
        if (!g->known) {
            unsafe++;
            ASSERT_EQ_STR(g->module, "posix");
            ASSERT_EQ_STR(g->name, "system");
            ASSERT_TRUE(g->path[0] != '\0');
        } else if (strcmp(g->name, "_rebuild_tensor_v2") == 0) {
            ASSERT_EQ_STR(g->module, "torch._utils");
        }
    }
    ASSERT_EQ_INT(unsafe, 1);
    ckpt_close(c);
}

/* Every tensor of a torch fixture matches what torch reported when it wrote the file. */
static void check_against_expected(const char *fixture, const char *expected)
{
    size_t len;
    char *text = (char *)ckpt_test_read_file(ckpt_test_data(expected), &len);
    cJSON *doc, *tensors, *item;
    ckpt_ckpt *c;

    ASSERT_TRUE(text != NULL);
    text[len] = '\0';
    doc = cJSON_Parse(text);
    free(text);
    ASSERT_TRUE(doc != NULL);
    c = open_fixture(fixture, NULL);
    if (!c) {
        cJSON_Delete(doc);
        ASSERT_OK(-1);
    }
    tensors = cJSON_GetObjectItem(doc, "tensors");
    cJSON_ArrayForEach(item, tensors) {
        const char *name = cJSON_GetObjectItem(item, "name")->valuestring;
        const ckpt_tensor *t = ckpt_tensor_find(c, name);
        cJSON *dim;
        int d = 0;

        if (!t) {
            /* a memo-shared alias is one tensor, named after its first key path */
            cJSON *alias = cJSON_GetObjectItem(item, "alias_of");
            if (alias && cJSON_IsString(alias))
                continue;
            ckpt_test_fail(__FILE__, __LINE__, "%s: tensor '%s' not found", fixture, name);
            break;
        }
        ASSERT_EQ_STR(ckpt_dtype_name(t->dtype), cJSON_GetObjectItem(item, "dtype")->valuestring);
        cJSON_ArrayForEach(dim, cJSON_GetObjectItem(item, "shape")) {
            ASSERT_EQ_INT(t->shape[d], (long long)dim->valuedouble);
            d++;
        }
        ASSERT_EQ_INT(t->ndim, d);
        d = 0;
        cJSON_ArrayForEach(dim, cJSON_GetObjectItem(item, "stride")) {
            ASSERT_EQ_INT(t->stride[d], (long long)dim->valuedouble);
            d++;
        }
        if (cJSON_GetObjectItem(item, "storage_offset"))
            ASSERT_EQ_INT(t->offset, (long long)cJSON_GetObjectItem(item, "storage_offset")->valuedouble);
    }
    ckpt_close(c);
    cJSON_Delete(doc);
}

CKPT_TEST(test_checkpoint_torch_fixtures_match_torch)
{
    static const char *names[] = { "basic", "views", "scalars", "dtypes", "params", "megatron", "proto4",
                                   "legacy", "big_names", "unsafe_os_system" };
    size_t i;
    char fixture[128], expected[128];

    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(fixture, sizeof fixture, "torch/%s.pt", names[i]);
        snprintf(expected, sizeof expected, "torch/expected/%s.json", names[i]);
        check_against_expected(fixture, expected);
    }
}

CKPT_TEST(test_checkpoint_format_registry)
{
    size_t i, n = ckpt_format_count();
    unsigned caps;
    const char *ext;

    /* hdf5 is there when the library was built with HDF5 */
    ASSERT_EQ_INT(n, 5 + (ckpt_format_find("hdf5") != NULL));
    for (i = 0; i < n; i++) {
        ASSERT_TRUE(ckpt_format_at(i, &caps, &ext) != NULL);
        ASSERT_TRUE(caps & CKPT_FORMAT_READ);
        /* formats that read a directory have no extension; those that write, write the files
         * of a directory a plan lays out (torch_dcp's data files), never one by path */
        ASSERT_TRUE(ext && (ext[0] == '.' || ext[0] == '\0'));
    }
    ASSERT_TRUE(ckpt_format_at(n, NULL, NULL) == NULL);
    ASSERT_EQ_STR(ckpt_format_for_path("x/model.safetensors"), "safetensors");
    ASSERT_EQ_STR(ckpt_format_for_path("pytorch_model.bin"), "torch");
    ASSERT_EQ_STR(ckpt_format_for_path("model_state.tp01.pdparams"), "pdparams");
    ASSERT_TRUE(ckpt_format_for_path("model.weights") == NULL);
    ASSERT_EQ_STR(ckpt_format_find("torch_dist"), "torch_dcp");
    ASSERT_EQ_STR(ckpt_format_find("dcp"), "torch_dcp");
}

/* A bytes item of a Distributed Checkpoint read as a checkpoint of its own, in place: megatron-
 * core 0.13.1's dp_zero_gather_scatter keeps each rank's distrib_optim.pt dict there, and it
 * gives the same tensors as the legacy file of the same run. */
CKPT_TEST(test_checkpoint_open_item_reads_in_place)
{
    static const char key[] = "optimizer.distributed.dp_group_idx_1.param_state/shard_0_1";
    ckpt_ckpt *dcp = open_fixture("megatron/distopt/core013_a_tp2pp1dp2_buckets/dp_zero_gather_scatter/iter_0000003",
                                  NULL);
    ckpt_ckpt *legacy = open_fixture("megatron/distopt/core013_a_tp2pp1dp2_buckets/legacy/iter_0000003/mp_rank_01/"
                                     "distrib_optim.pt",
                                     NULL);
    const ckpt_value *item, *root;
    const ckpt_ckpt *in = NULL, *again = NULL;
    const ckpt_tensor *a, *b;
    ckpt_value fake;
    float x[1344], y[1344];

    ASSERT_TRUE(dcp != NULL && legacy != NULL);
    item = ckpt_value_dict_get(ckpt_root(dcp), key);
    ASSERT_TRUE(item != NULL && item->kind == CKPT_VAL_BYTES);
    ASSERT_OK(ckpt_open_item(&in, dcp, item, key, NULL));
    ASSERT_EQ_STR(ckpt_format_name(in), "torch");
    ASSERT_TRUE(strstr(ckpt_path(in), "__1_1.distcp, item 'optimizer.distributed.dp_group_idx_1.param_state/"
                                      "shard_0_1'") != NULL);
    root = ckpt_root(in);
    ASSERT_TRUE(root && root->kind == CKPT_VAL_LIST && root->u.seq.n == 1);
    ASSERT_EQ_INT(ckpt_tensor_count(in), 3);
    a = ckpt_tensor_find(in, "0/0/(torch.float32, torch.float32)/exp_avg_sq");
    b = ckpt_tensor_find(legacy, "0/(torch.float32, torch.float32)/exp_avg_sq");
    ASSERT_TRUE(a != NULL && b != NULL && ckpt_tensor_numel(a) == 1344 && ckpt_tensor_numel(b) == 1344);
    ASSERT_OK(ckpt_tensor_read(a, 0, 1344, CKPT_DTYPE_F32, x));
    ASSERT_OK(ckpt_tensor_read(b, 0, 1344, CKPT_DTYPE_F32, y));
    ASSERT_TRUE(memcmp(x, y, sizeof x) == 0);
    /* opened once: the same item gives the same checkpoint */
    ASSERT_OK(ckpt_open_item(&again, dcp, item, key, NULL));
    ASSERT_TRUE(again == in);
    /* bytes that no input file holds are not opened */
    memset(&fake, 0, sizeof fake);
    fake.kind = CKPT_VAL_BYTES;
    fake.u.bytes.ptr = (const uint8_t *)x;
    fake.u.bytes.len = sizeof x;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_open_item(&again, dcp, &fake, "fake", NULL));
    ASSERT_ERROR_MENTIONS("item 'fake' lies in no input file");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_open_item(&again, dcp, root, "a list", NULL));
    ckpt_close(legacy);
    ckpt_close(dcp); /* closes `in` */
}
