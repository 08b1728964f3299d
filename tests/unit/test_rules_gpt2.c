/* Implementation variants of a forward map ("variants": {"local": [rules]}), as GPT-2's
 * hf_gpt2_megatron uses them for Megatron's local layer names: a variant's rules replace the
 * rules of the same name, the built-in map's variant and its inverse load by their own names
 * ("<map>_<variant>", "<inverse>_<variant>"), and a variant that names no rule or does not
 * parse is refused when the map is loaded, naming it. */
#include "test.h"

#include <stdlib.h>

#define MAP_HEAD "{\"ckptconv_map\": 1, \"name\": \"m\", \"rules\": [" \
                 "{\"name\": \"norm\", \"from\": \"a.{L}.n\", \"to\": \"b.{L}.te_n\"}," \
                 "{\"from\": \"a.{L}.w\", \"to\": \"b.{L}.w\", \"ops\": [{\"op\": \"transpose\"}]}], "

static int parse(const char *text, ckpt_map **m)
{
    return ckpt_map_parse(m, text, strlen(text), "m.json");
}

CKPT_TEST(test_rules_gpt2_variant_checked)
{
    ckpt_map *m = NULL;

    ASSERT_OK(parse(MAP_HEAD "\"variants\": {\"local\": [{\"name\": \"norm\", \"from\": \"a.{L}.n\", "
                             "\"to\": \"b.{L}.local_n\"}]}}", &m));
    ASSERT_EQ_STR(ckpt_map_name(m), "m");
    ckpt_map_free(m);
    ASSERT_FAILS(CKPT_EFORMAT, parse(MAP_HEAD "\"variants\": {\"local\": [{\"name\": \"nrm\", \"from\": \"a.{L}.n\", "
                                              "\"to\": \"b.{L}.local_n\"}]}}", &m));
    ASSERT_ERROR_MENTIONS("m.json: variants: local[0]");
    ASSERT_ERROR_MENTIONS("needs the \"name\" of a rule of \"rules\" it replaces");
    ASSERT_FAILS(CKPT_EFORMAT, parse(MAP_HEAD "\"variants\": {\"local\": [{\"name\": \"norm\", \"from\": \"a.{L}.n\", "
                                              "\"to\": \"b.{X}.local_n\"}]}}", &m));
    ASSERT_ERROR_MENTIONS("m.json (variant local)");
    ASSERT_ERROR_MENTIONS("b.{X}.local_n");
    ASSERT_FAILS(CKPT_EFORMAT, parse(MAP_HEAD "\"variants\": {\"local\": []}}", &m));
    ASSERT_ERROR_MENTIONS("\"local\" must be a name with a non-empty list of rules");
    ASSERT_FAILS(CKPT_EFORMAT, parse(MAP_HEAD "\"variants\": [1]}", &m));
    ASSERT_ERROR_MENTIONS("\"variants\" must be an object");
}
