/* Which side of a map a checkpoint is on, by substrings of its tensor names (PaddleNLP's
 * converter: "self_attn" is PaddleNLP, "transformer" is Transformer Engine). Given the
 * wrong side, say which map was meant instead of failing on the first unknown name. */
#include "rules_private.h"

#include <string.h>

static const char *first_with(const char *const *names, size_t n, const char *needle)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (names[i] && strstr(names[i], needle))
            return names[i];
    return NULL;
}

int ckpt_map_detect(const ckpt_map *m, const char *const *names, size_t n)
{
    const char *source, *target;

    if (!m || (!names && n))
        return ckpt_error_set(CKPT_EINVALID, "ckpt_map_detect: NULL argument");
    if (!m->detect_source)
        return 0;
    source = first_with(names, n, m->detect_source);
    target = first_with(names, n, m->detect_target);
    if (source && !target)
        return 0;
    if (target && !source)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP_DIRECTION,
                               "input is a %s checkpoint (names like '%s'); use the inverse map %s", m->target_kind,
                               target, m->inverse_name);
    if (source)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP,
                               "The input checkpoint is not a valid checkpoint. It has both %s names "
                               "(containing '%s', like '%s') and %s names (containing '%s', like '%s')",
                               m->source_kind, m->detect_source, source, m->target_kind, m->detect_target, target);
    if (n == 0)
        return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP,
                               "The input checkpoint is not a valid checkpoint. It has no tensors");
    return ckpt_error_setc(CKPT_EFORMAT, CKPT_ERRCLASS_MAP,
                           "The input checkpoint is not a valid checkpoint. No tensor name contains '%s' (%s) "
                           "or '%s' (%s); names are like '%s'",
                           m->detect_source, m->source_kind, m->detect_target, m->target_kind,
                           names[0] ? names[0] : "");
}
