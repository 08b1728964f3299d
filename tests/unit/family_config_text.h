/* What the family config tests (test_family.c, test_family_moe.c) share: a config.json of
 * fixed sizes plus the fields a case adds, read by a built-in family, and a field's value. */
#ifndef CKPT_TEST_FAMILY_CONFIG_TEXT_H
#define CKPT_TEST_FAMILY_CONFIG_TEXT_H

#include <ckpt/family.h>

#include <stdint.h>
#include <stdio.h>

#define SIZES                                                                                                  \
    "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
    "\"num_key_value_heads\": 2, \"vocab_size\": 200"

/* cfg/config.json holding SIZES and `extra` (JSON members, or NULL) as `family` reads it */
static inline int read_cfg(const char *family, const char *extra, ckpt_family_config **c)
{
    const ckpt_family *f;
    char text[1024];
    int rc;

    snprintf(text, sizeof text, "{" SIZES "%s%s}", extra ? ", " : "", extra ? extra : "");
    if ((rc = ckpt_family_builtin(&f, family)) < 0)
        return rc;
    return ckpt_family_config_read(c, f, CKPT_FAMILY_HF, "cfg/config.json", text);
}

/* an integer or boolean field's value; -1 for None, -98 for another kind, -99 when not there */
static inline int64_t int_of(const ckpt_family_config *c, const char *field)
{
    const ckpt_value *v;

    if (ckpt_family_config_get(c, field, &v) < 0)
        return -99;
    return v->kind == CKPT_VAL_INT ? v->u.integer : v->kind == CKPT_VAL_BOOL ? v->u.boolean : v->kind == CKPT_VAL_NONE ? -1 : -98;
}

#endif
