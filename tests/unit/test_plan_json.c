/* The JSON every job's report shares: the plan's files and what was left out, and after a
 * run what was written. */
#include "test.h"

#include <stdlib.h>

CKPT_TEST(test_plan_json_keys)
{
    static const int64_t shape[2] = { 2, 3 };
    ckpt_plan_report rep;
    ckpt_plan *p;
    const ckpt_node *zeros;
    ckpt_buf b = CKPT_BUF_INIT;
    uint64_t sizes[2] = { 1000, 2 };
    size_t f;

    ASSERT_OK(ckpt_plan_new(&p));
    ASSERT_OK(ckpt_plan_add_file(p, "a/model.safetensors", NULL, &f));
    ASSERT_OK(ckpt_node_zeros(ckpt_plan_graph(p), CKPT_DTYPE_F32, 2, shape, &zeros));
    ASSERT_OK(ckpt_plan_add_tensor(p, f, "w", zeros, 0, NULL));
    ASSERT_OK(ckpt_plan_add_bytes(p, "latest.txt", "10", 2));
    ASSERT_EQ_INT(ckpt_plan_leave_out(p, "m.inv_freq", "a \"buffer\""), 1);
    ASSERT_OK(ckpt_plan_json(p, NULL, &b));
    ASSERT_EQ_STR((const char *)b.data,
                  "{\"dry_run\":true,\"files\":[{\"path\":\"a/model.safetensors\",\"kind\":\"tensors\","
                  "\"format\":\"safetensors\",\"tensors\":1,\"bytes\":24},{\"path\":\"latest.txt\",\"kind\":\"bytes\","
                  "\"tensors\":0,\"bytes\":2}],\"tensors\":1,\"bytes\":26,"
                  "\"dropped\":[{\"name\":\"m.inv_freq\",\"reason\":\"a \\\"buffer\\\"\"}]}");
    memset(&rep, 0, sizeof rep);
    rep.bytes_written = 1002;
    rep.file_bytes = sizes;
    ckpt_buf_clear(&b);
    ASSERT_OK(ckpt_plan_json(p, &rep, &b));
    ASSERT_TRUE(strstr((const char *)b.data, "{\"dry_run\":false,") == (const char *)b.data);
    ASSERT_TRUE(strstr((const char *)b.data, "\"bytes\":24,\"bytes_written\":1000}") != NULL);
    ASSERT_TRUE(strstr((const char *)b.data, "\"bytes_written\":1002}") != NULL);
    ckpt_buf_dispose(&b);
    ckpt_plan_free(p);
}

CKPT_TEST(test_plan_json_notes)
{
    ckpt_plan *p;
    ckpt_buf b = CKPT_BUF_INIT;

    ASSERT_OK(ckpt_plan_new(&p));
    ASSERT_EQ_STR(ckpt_plan_notes(p), "");
    ASSERT_OK(ckpt_plan_add_bytes(p, "config.json", "{}", 2));
    ASSERT_OK(ckpt_plan_note(p, "config.json", "no token ids"));
    ASSERT_OK(ckpt_plan_note(p, "config.json", "a \"second\""));
    ASSERT_EQ_STR(ckpt_plan_notes(p), "config.json: no token ids\nconfig.json: a \"second\"\n");
    ASSERT_OK(ckpt_plan_json(p, NULL, &b));
    ASSERT_EQ_STR((const char *)b.data,
                  "{\"dry_run\":true,\"files\":[{\"path\":\"config.json\",\"kind\":\"bytes\",\"tensors\":0,"
                  "\"bytes\":2}],\"tensors\":0,\"bytes\":2,\"dropped\":[],"
                  "\"notes\":[\"config.json: no token ids\",\"config.json: a \\\"second\\\"\"]}");
    ckpt_buf_dispose(&b);
    ckpt_plan_free(p);
}
