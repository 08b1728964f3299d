/* Output sharding: the cases of huggingface_hub's split_torch_state_dict_into_shards, file
 * names, and the index json byte for byte as Python's json.dumps writes it. */
#include "test.h"

#include <stdlib.h>

#define OWN CKPT_SHARD_OWN_STORAGE

/* The names of file i's entries, joined with ',', in a static buffer. */
static const char *file_list(const ckpt_shard_plan *p, const ckpt_shard_entry *entries, size_t i)
{
    static char out[1024];
    size_t k;

    out[0] = '\0';
    for (k = 0; k < p->files[i].n_entries; k++) {
        if (k)
            strncat(out, ",", sizeof out - strlen(out) - 1);
        strncat(out, entries[p->files[i].entries[k]].name, sizeof out - strlen(out) - 1);
    }
    return out;
}

CKPT_TEST(test_shard_everything_fits_one_file)
{
    static const ckpt_shard_entry e[] = { { "a", 4, OWN }, { "b", 4, OWN }, { "tied", 4, 0 } };
    ckpt_shard_plan *p;

    ASSERT_OK(ckpt_shard_plan_new(&p, e, 3, 100, "model", ".safetensors"));
    ASSERT_EQ_INT(p->n_files, 1);
    ASSERT_EQ_STR(p->files[0].name, "model.safetensors");
    ASSERT_EQ_STR(file_list(p, e, 0), "a,b,tied");
    ASSERT_EQ_INT(p->files[0].nbytes, 8);
    ASSERT_EQ_INT(p->total_size, 8);
    ASSERT_TRUE(p->index_name == NULL);
    ckpt_shard_plan_free(p);
}

/* huggingface_hub's own test: a tensor over the maximum is appended as a shard at once,
 * before the shard still being filled. */
CKPT_TEST(test_shard_larger_than_max_alone)
{
    static const ckpt_shard_entry e[] = {
        { "layer_1", 6, OWN }, { "layer_2", 10, OWN }, { "layer_3", 30, OWN }, { "layer_4", 2, OWN },
        { "layer_5", 2, OWN },
    };
    ckpt_shard_plan *p;

    ASSERT_OK(ckpt_shard_plan_new(&p, e, 5, 10, "model", ".safetensors"));
    ASSERT_EQ_INT(p->n_files, 4);
    ASSERT_EQ_STR(p->files[0].name, "model-00001-of-00004.safetensors");
    ASSERT_EQ_STR(file_list(p, e, 0), "layer_1");
    ASSERT_EQ_STR(file_list(p, e, 1), "layer_3");
    ASSERT_EQ_STR(file_list(p, e, 2), "layer_2");
    ASSERT_EQ_STR(p->files[3].name, "model-00004-of-00004.safetensors");
    ASSERT_EQ_STR(file_list(p, e, 3), "layer_4,layer_5");
    ASSERT_EQ_INT(p->files[1].nbytes, 30);
    ASSERT_EQ_INT(p->total_size, 50);
    ASSERT_EQ_STR(p->index_name, "model.safetensors.index.json");
    ckpt_shard_plan_free(p);
}

CKPT_TEST(test_shard_exact_fill)
{
    static const ckpt_shard_entry e[] = { { "a", 4, OWN }, { "b", 6, OWN }, { "c", 10, OWN }, { "d", 1, OWN } };
    ckpt_shard_plan *p;

    ASSERT_OK(ckpt_shard_plan_new(&p, e, 4, 10, "pytorch_model", ".bin"));
    ASSERT_EQ_INT(p->n_files, 3);
    ASSERT_EQ_STR(file_list(p, e, 0), "a,b");
    ASSERT_EQ_STR(file_list(p, e, 1), "c");
    ASSERT_EQ_STR(file_list(p, e, 2), "d");
    ASSERT_EQ_STR(p->files[2].name, "pytorch_model-00003-of-00003.bin");
    ASSERT_EQ_STR(p->index_name, "pytorch_model.bin.index.json");
    ckpt_shard_plan_free(p);
}

/* Tied names count once and join the first one's shard after its own tensors, storage by
 * storage in the order the storages first appeared; a tie of a tie is the same storage. */
CKPT_TEST(test_shard_shared_storage_joins_first)
{
    static const ckpt_shard_entry e[] = {
        { "a", 4, OWN }, { "b", 4, OWN }, { "tb", 4, 1 }, { "ta", 4, 0 }, { "d", 4, OWN }, { "tta", 4, 3 },
    };
    ckpt_shard_plan *p;

    ASSERT_OK(ckpt_shard_plan_new(&p, e, 6, 8, "pytorch_model", ".bin"));
    ASSERT_EQ_INT(p->n_files, 2);
    ASSERT_EQ_STR(file_list(p, e, 0), "a,b,ta,tta,tb");
    ASSERT_EQ_STR(file_list(p, e, 1), "d");
    ASSERT_EQ_INT(p->files[0].nbytes, 8);
    ASSERT_EQ_INT(p->files[1].nbytes, 4);
    ASSERT_EQ_INT(p->total_size, 12);
    ckpt_shard_plan_free(p);
}

/* torch gives every empty storage the address 0: zero-element tensors are one storage. */
CKPT_TEST(test_shard_zero_element_tensors_share_a_storage)
{
    static const ckpt_shard_entry e[] = {
        { "a", 4, OWN }, { "e1", 0, OWN }, { "b", 4, OWN }, { "e2", 0, OWN }, { "c", 4, OWN }, { "e3", 0, 3 },
    };
    ckpt_shard_plan *p;

    ASSERT_OK(ckpt_shard_plan_new(&p, e, 6, 8, "model", ".safetensors"));
    ASSERT_EQ_INT(p->n_files, 2);
    ASSERT_EQ_STR(file_list(p, e, 0), "a,e1,b,e2,e3");
    ASSERT_EQ_STR(file_list(p, e, 1), "c");
    ASSERT_EQ_INT(p->total_size, 12);
    ckpt_shard_plan_free(p);
    /* one file keeps the order given */
    ASSERT_OK(ckpt_shard_plan_new(&p, e, 6, 100, "model", ".safetensors"));
    ASSERT_EQ_INT(p->n_files, 1);
    ASSERT_EQ_STR(file_list(p, e, 0), "a,e1,b,e2,c,e3");
    ckpt_shard_plan_free(p);
}

CKPT_TEST(test_shard_nothing_to_write)
{
    ckpt_shard_plan *p;

    ASSERT_OK(ckpt_shard_plan_new(&p, NULL, 0, 10, "model", ".safetensors"));
    ASSERT_EQ_INT(p->n_files, 0);
    ASSERT_TRUE(p->index_name == NULL);
    ASSERT_EQ_INT(p->total_size, 0);
    ckpt_shard_plan_free(p);
    ckpt_shard_plan_free(NULL);
}

/* json.dumps(index, indent=2, sort_keys=True) + "\n"; file names relative to the index. */
CKPT_TEST(test_shard_index_json)
{
    static const ckpt_shard_entry e[] = {
        { "b", 4, OWN }, { "a", 4, OWN }, { "emb\"\xc3\xa9", 4, OWN }, { "lm_head.weight", 4, 1 },
    };
    static const char expect[] =
        "{\n  \"metadata\": {\n    \"total_size\": 12\n  },\n  \"weight_map\": {\n"
        "    \"a\": \"pytorch_model-00001-of-00002.bin\",\n"
        "    \"b\": \"pytorch_model-00001-of-00002.bin\",\n"
        "    \"emb\\\"\\u00e9\": \"pytorch_model-00002-of-00002.bin\",\n"
        "    \"lm_head.weight\": \"pytorch_model-00001-of-00002.bin\"\n  }\n}\n";
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_shard_plan *p;

    ASSERT_OK(ckpt_shard_plan_new(&p, e, 4, 8, "mp_rank_01/pytorch_model", ".bin"));
    ASSERT_EQ_STR(p->files[0].name, "mp_rank_01/pytorch_model-00001-of-00002.bin");
    ASSERT_EQ_STR(p->index_name, "mp_rank_01/pytorch_model.bin.index.json");
    ASSERT_OK(ckpt_shard_index_json(p, 0, &json));
    ckpt_shard_plan_free(p);
    ASSERT_EQ_STR((const char *)json.data, expect);
    ckpt_buf_dispose(&json);
}

CKPT_TEST(test_shard_index_json_escapes)
{
    static const ckpt_shard_entry e[] = { { "t\x01\t\x7f\xf0\x9f\x98\x80", 1, OWN }, { "u\\/", 1, OWN } };
    static const ckpt_shard_entry bad[] = { { "x\xff", 1, OWN } };
    ckpt_buf json = CKPT_BUF_INIT;
    ckpt_shard_plan *p;

    ASSERT_OK(ckpt_shard_plan_new(&p, e, 2, 1, "m", ".bin"));
    ASSERT_OK(ckpt_shard_index_json(p, 0, &json));
    ckpt_shard_plan_free(p);
    ASSERT_TRUE(strstr((const char *)json.data, "\"t\\u0001\\t\\u007f\\ud83d\\ude00\": \"m-00001-of-00002.bin\""));
    ASSERT_TRUE(strstr((const char *)json.data, "\"u\\\\/\": \"m-00002-of-00002.bin\"\n"));
    ckpt_buf_dispose(&json);
    ASSERT_OK(ckpt_shard_plan_new(&p, bad, 1, 1, "m", ".bin"));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_shard_index_json(p, 0, &json));
    ASSERT_ERROR_MENTIONS("UTF-8");
    ckpt_shard_plan_free(p);
    ckpt_buf_dispose(&json);
}

CKPT_TEST(test_shard_bad_entries)
{
    static const ckpt_shard_entry forward[] = { { "a", 4, 1 }, { "b", 4, OWN } };
    static const ckpt_shard_entry twice[] = { { "a", 4, OWN }, { "b", 4, OWN }, { "a", 4, OWN } };
    static const ckpt_shard_entry unnamed[] = { { NULL, 4, OWN } };
    ckpt_shard_plan *p = (ckpt_shard_plan *)1;

    ASSERT_FAILS(CKPT_EINVALID, ckpt_shard_plan_new(&p, forward, 2, 10, "model", ".bin"));
    ASSERT_TRUE(p == NULL);
    ASSERT_ERROR_MENTIONS("a: shares the storage of entry 1");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_shard_plan_new(&p, twice, 3, 10, "model", ".bin"));
    ASSERT_ERROR_MENTIONS("a: two tensors of that name");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_shard_plan_new(&p, unnamed, 1, 10, "model", ".bin"));
    ASSERT_ERROR_MENTIONS("entry 0 has no name");
}
