/* Maps built into the library: formats/maps/<name>.json, embedded at build time, and the
 * inverse of each, derived from the same text when asked for by its own name; a variant
 * that names itself ("variants": {"local": {"name": ...}}) is loaded by that name too. */
#include "rules_private.h"

#include <string.h>

int ckpt_map_builtin(ckpt_map **out, const char *name)
{
    size_t i;

    if (!out || !name)
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_builtin: NULL argument");
    *out = NULL;
    for (i = 0; i < ckpt_rules__builtin_n; i++) {
        const map_builtin *b = &ckpt_rules__builtins[i];
        if (strcmp(b->name, name) == 0)
            return ckpt_rules__map_parse_variant(out, b->json, b->len, b->name, 0, b->variant);
        if (strcmp(b->inverse_name, name) == 0)
            return ckpt_rules__map_parse_variant(out, b->json, b->len, b->name, 1, b->variant);
    }
    return ckpt_error_set(CKPT_ENOTFOUND, "no built-in map is named '%s'", name);
}

size_t ckpt_map_builtin_count(void)
{
    return 2 * ckpt_rules__builtin_n;
}

const char *ckpt_map_builtin_at(size_t i)
{
    if (i >= 2 * ckpt_rules__builtin_n)
        return NULL;
    return i % 2 ? ckpt_rules__builtins[i / 2].inverse_name : ckpt_rules__builtins[i / 2].name;
}
