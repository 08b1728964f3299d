/* Multi-token prediction layers' copies of main tensors (src/rules/family_mtp.c,
 * hf_tensors.mtp_shared): DeepSeek-V3's layer num_hidden_layers + M keeps embed_tokens and
 * shared_head.head, copies of model.embed_tokens and lm_head; a decoder layer's tensor, a layer
 * past num_nextn_predict_layers and another framework's names are no copy; the copies an MTP
 * layer has are listed in order, none past the last MTP layer. */
#include "test.h"

#include <ckpt/family.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the 4.53 fixture's config with `extra` inserted after its first '{' */
static int read_config(const char *extra, ckpt_family_config **c)
{
    const ckpt_family *f;
    char path[512], *text;
    unsigned char *bytes;
    size_t len;
    int rc;

    snprintf(path, sizeof path, "%s/config.json", ckpt_test_data("hf/deepseek_v3_tiny"));
    if (!(bytes = ckpt_test_read_file(path, &len)) || len < 2 || bytes[0] != '{' ||
        !(text = calloc(len + strlen(extra) + 1, 1))) {
        free(bytes);
        return -1;
    }
    sprintf(text, "{%s%.*s", extra, (int)(len - 1), (const char *)bytes + 1);
    free(bytes);
    rc = ckpt_family_builtin(&f, "deepseek_v3");
    if (rc == 0)
        rc = ckpt_family_config_read(c, f, CKPT_FAMILY_HF, "cfg/config.json", text);
    free(text);
    return rc;
}

CKPT_TEST(test_family_mtp_copy_of)
{
    ckpt_family_config *c = NULL;
    const ckpt_family *f;

    ASSERT_OK(read_config("\"num_nextn_predict_layers\": 1, ", &c));
    f = ckpt_family_config_family(c);
    ASSERT_EQ_STR(ckpt_family_mtp_copy_of(f, c, CKPT_FAMILY_HF, "model.layers.3.embed_tokens.weight"),
                  "model.embed_tokens.weight");
    ASSERT_EQ_STR(ckpt_family_mtp_copy_of(f, c, CKPT_FAMILY_HF, "model.layers.3.shared_head.head.weight"),
                  "lm_head.weight");
    ASSERT_TRUE(ckpt_family_mtp_copy_of(f, c, CKPT_FAMILY_HF, "model.layers.2.embed_tokens.weight") == NULL);
    ASSERT_TRUE(ckpt_family_mtp_copy_of(f, c, CKPT_FAMILY_HF, "model.layers.4.embed_tokens.weight") == NULL);
    ASSERT_TRUE(ckpt_family_mtp_copy_of(f, c, CKPT_FAMILY_HF, "model.layers.3.enorm.weight") == NULL);
    ASSERT_TRUE(ckpt_family_mtp_copy_of(f, c, CKPT_FAMILY_HF, "model.embed_tokens.weight") == NULL);
    ASSERT_TRUE(ckpt_family_mtp_copy_of(f, c, CKPT_FAMILY_MEGATRON, "model.layers.3.embed_tokens.weight") == NULL);
    ckpt_family_config_free(c);
    /* no MTP layer: nothing is a copy */
    ASSERT_OK(read_config("", &c));
    ASSERT_TRUE(ckpt_family_mtp_copy_of(ckpt_family_config_family(c), c, CKPT_FAMILY_HF,
                                        "model.layers.3.embed_tokens.weight") == NULL);
    ckpt_family_config_free(c);
}

CKPT_TEST(test_family_mtp_copies)
{
    ckpt_family_config *c = NULL;
    const ckpt_family *f;
    ckpt_buf name = CKPT_BUF_INIT;
    const char *of = NULL;

    ASSERT_OK(read_config("\"num_nextn_predict_layers\": 1, ", &c));
    f = ckpt_family_config_family(c);
    ASSERT_EQ_INT(ckpt_family_mtp_copy(f, c, CKPT_FAMILY_HF, 0, 0, &name, &of), 1);
    ASSERT_EQ_STR((const char *)name.data, "model.layers.3.embed_tokens.weight");
    ASSERT_EQ_STR(of, "model.embed_tokens.weight");
    ckpt_buf_clear(&name);
    ASSERT_EQ_INT(ckpt_family_mtp_copy(f, c, CKPT_FAMILY_HF, 0, 1, &name, &of), 1);
    ASSERT_EQ_STR((const char *)name.data, "model.layers.3.shared_head.head.weight");
    ASSERT_EQ_STR(of, "lm_head.weight");
    ASSERT_EQ_INT(ckpt_family_mtp_copy(f, c, CKPT_FAMILY_HF, 0, 2, &name, &of), 0);
    ASSERT_EQ_INT(ckpt_family_mtp_copy(f, c, CKPT_FAMILY_HF, 1, 0, &name, &of), 0);
    ckpt_buf_dispose(&name);
    ckpt_family_config_free(c);
}
