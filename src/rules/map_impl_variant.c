/* Implementation variants of a forward map: `"variants": {"local": [rules]}` names rules
 * that replace the map's rules of the same name (Transformer Engine and local layer names
 * of one model are one map, not two copies). A built-in map's variant is loaded by its own
 * name, "<map>_<variant>", and its inverse by "<inverse>_<variant>". */
#include "rules_private.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *rule_named(const cJSON *rules, const char *name)
{
    const cJSON *r;

    cJSON_ArrayForEach(r, rules) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return r;
    }
    return NULL;
}

static int ckpt_rules__variants_check(const cJSON *root, const char *origin)
{
    const cJSON *variants = cJSON_GetObjectItemCaseSensitive(root, "variants"), *v, *r,
                *rules = cJSON_GetObjectItemCaseSensitive(root, "rules");
    char where[MAP_WHERE_MAX];
    size_t i;

    if (!variants)
        return 0;
    if (!cJSON_IsObject(variants))
        return ckpt_error_set(CKPT_EFORMAT, "%s: \"variants\" must be an object of name: rules", origin);
    cJSON_ArrayForEach(v, variants) {
        if (!ckpt_rules__is_name(v->string, 0) || !cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
            return ckpt_error_set(CKPT_EFORMAT, "%s: variants: \"%s\" must be a name with a non-empty list of rules",
                                  origin, v->string);
        i = 0;
        cJSON_ArrayForEach(r, v) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "name");
            ckpt_rules__where(where, sizeof where, "%s: variants: %s[%zu]", origin, v->string, i++);
            if (!cJSON_IsString(n) || !rule_named(rules, n->valuestring))
                return ckpt_rules__json_fail(where, "%s", "needs the \"name\" of a rule of \"rules\" it replaces");
        }
    }
    return 0;
}

static int variant_text(const char *json, size_t len, const char *variant, const char *name, const char *inverse,
                        char **out);

int ckpt_rules__variants_parse(const cJSON *root, const char *origin)
{
    const cJSON *v;
    char *json = NULL, *text = NULL, where[MAP_WHERE_MAX];
    ckpt_map *m = NULL;
    int rc = ckpt_rules__variants_check(root, origin);

    if (rc < 0 || !cJSON_GetObjectItemCaseSensitive(root, "variants"))
        return rc;
    if (!(json = cJSON_PrintUnformatted(root)))
        return ckpt_error_oom();
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(root, "variants")) {
        ckpt_rules__where(where, sizeof where, "%s (variant %s)", origin, v->string);
        if ((rc = variant_text(json, strlen(json), v->string, "variant", "variant_inverse", &text)) < 0 ||
            (rc = ckpt_rules__map_parse(&m, text, strlen(text), where, 0)) < 0)
            break;
        ckpt_map_free(m);
        cJSON_free(text);
        text = NULL;
    }
    cJSON_free(text);
    cJSON_free(json);
    return rc == CKPT_ENOMEM ? ckpt_error_oom() : rc;
}

/* The map text with variant's rules in place of the rules they name, named `name` and
 * `inverse`; *out is malloc'd. CKPT_ENOTFOUND when the map has no such variant. */
static int variant_text(const char *json, size_t len, const char *variant, const char *name, const char *inverse,
                        char **out)
{
    cJSON *root = cJSON_ParseWithLength(json, len), *rules, *v, *r, *inv;
    int rc = CKPT_ENOTFOUND;

    *out = NULL;
    rules = cJSON_GetObjectItemCaseSensitive(root, "rules");
    v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "variants"), variant);
    if (cJSON_IsArray(v) && cJSON_IsArray(rules)) {
        rc = 0;
        cJSON_ArrayForEach(r, v) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "name");
            cJSON *old = (cJSON *)rule_named(rules, cJSON_IsString(n) ? n->valuestring : "");
            cJSON *copy = cJSON_Duplicate(r, 1);
            if (!old || !copy || !cJSON_ReplaceItemViaPointer(rules, old, copy)) {
                cJSON_Delete(copy);
                rc = old ? CKPT_ENOMEM : CKPT_ENOTFOUND;
                break;
            }
        }
        cJSON_DeleteItemFromObjectCaseSensitive(root, "variants");
        if (!(inv = cJSON_GetObjectItemCaseSensitive(root, "inverse")))
            inv = cJSON_AddObjectToObject(root, "inverse");
        cJSON_DeleteItemFromObjectCaseSensitive(inv, "name");
        if (rc == 0 && (!inv || !cJSON_ReplaceItemInObjectCaseSensitive(root, "name", cJSON_CreateString(name)) ||
                        !cJSON_AddStringToObject(inv, "name", inverse) || !(*out = cJSON_PrintUnformatted(root))))
            rc = CKPT_ENOMEM;
    }
    cJSON_Delete(root);
    return rc;
}

int ckpt_rules__variant_builtin(ckpt_map **out, const map_builtin *b, const char *name)
{
    size_t nl = strlen(b->name), il = strlen(b->inverse_name), n = strlen(name);
    int inverted = n > il + 1 && strncmp(name, b->inverse_name, il) == 0 && name[il] == '_';
    const char *variant = inverted ? name + il + 1 : name + nl + 1;
    char alias[256], *text = NULL;
    int rc;

    if (!inverted && !(n > nl + 1 && strncmp(name, b->name, nl) == 0 && name[nl] == '_'))
        return CKPT_ENOTFOUND;
    if (snprintf(alias, sizeof alias, "%s_%s", inverted ? b->name : b->inverse_name, variant) >= (int)sizeof alias)
        return CKPT_ENOTFOUND;
    rc = variant_text(b->json, b->len, variant, inverted ? alias : name, inverted ? name : alias, &text);
    if (rc == CKPT_ENOMEM)
        rc = ckpt_error_oom();
    if (rc == 0)
        rc = ckpt_rules__map_parse(out, text, strlen(text), inverted ? alias : name, inverted);
    cJSON_free(text);
    return rc;
}
