/* Name patterns: "llama.layers.{L}.mlp.down_proj.weight". A capture matches one or more
 * decimal digits, however many: layer 100 and beyond must not be cut at two digits. The
 * captured text is carried over verbatim, so an index never changes its spelling.
 * "{M+num_hidden_layers}" numbers a run of layers after others (DeepSeek-V3's multi-token
 * prediction layers follow the decoder's): M is the index less the parameter. */
#include "rules_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int pattern_fail(const char *where, const char *text, const char *why)
{
    return ckpt_error_set(CKPT_EFORMAT, "%s: bad pattern \"%s\": %s", where, text, why);
}

static int is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident_char(char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

int ckpt_rules__pattern_parse(ckpt_arena *a, const char *text, const char *where, map_pattern *out)
{
    size_t n = strlen(text), i = 0, n_parts = 0, n_caps = 0, k;
    map_part *parts;

    if (n == 0)
        return pattern_fail(where, text, "empty");
    /* At most one part per character. */
    if (!(parts = ckpt_arena_alloc(a, n * sizeof *parts)))
        return CKPT_ENOMEM;
    while (i < n) {
        if (text[i] == '}')
            return pattern_fail(where, text, "'}' without '{'");
        if (text[i] != '{') {
            size_t start = i;
            while (i < n && text[i] != '{' && text[i] != '}')
                i++;
            parts[n_parts].text = text + start;
            parts[n_parts].len = i - start;
            parts[n_parts].capture = 0;
            parts[n_parts].shift = NULL;
            n_parts++;
            continue;
        }
        i++;
        if (!is_ident_start(text[i]))
            return pattern_fail(where, text, "'{' must be followed by a name and '}'");
        parts[n_parts].text = text + i;
        while (is_ident_char(text[i]))
            i++;
        parts[n_parts].len = (size_t)(text + i - parts[n_parts].text);
        parts[n_parts].capture = 1;
        parts[n_parts].shift = NULL;
        if (text[i] == '+') {
            size_t start = ++i;
            char *shift;
            if (!is_ident_start(text[i]))
                return pattern_fail(where, text, "'+' in a capture must be followed by a parameter name");
            while (is_ident_char(text[i]))
                i++;
            if (!(shift = ckpt_arena_alloc(a, i - start + 1)))
                return CKPT_ENOMEM;
            memcpy(shift, text + start, i - start);
            shift[i - start] = '\0';
            parts[n_parts].shift = shift;
        }
        if (text[i] != '}')
            return pattern_fail(where, text, "'{' must be followed by a name and '}'");
        i++;
        if (n_parts > 0 && parts[n_parts - 1].capture)
            return pattern_fail(where, text, "two captures side by side cannot be told apart");
        for (k = 0; k < n_parts; k++)
            if (parts[k].capture && parts[k].len == parts[n_parts].len &&
                memcmp(parts[k].text, parts[n_parts].text, parts[k].len) == 0)
                return pattern_fail(where, text, "a capture appears twice");
        if (++n_caps > MAP_MAX_CAPTURES)
            return pattern_fail(where, text, "too many captures");
        n_parts++;
    }
    out->text = text;
    out->parts = parts;
    out->n_parts = n_parts;
    return 0;
}

size_t ckpt_rules__pattern_capture_count(const map_pattern *p)
{
    size_t i, n = 0;

    for (i = 0; i < p->n_parts; i++)
        n += (size_t)p->parts[i].capture;
    return n;
}

/* Backtracking over capture lengths: a literal after a capture may itself start with a
 * digit ("{L}0.x"), so the longest run of digits is not always the answer. Depth is
 * bounded by the number of parts. */
static int match_from(const map_pattern *p, size_t part, const char *s, int prefix, map_capture *caps, size_t cap)
{
    const map_part *pt;
    size_t run, len, shortest;

    if (part == p->n_parts)
        return prefix || *s == '\0';
    pt = &p->parts[part];
    if (!pt->capture) {
        if (strncmp(s, pt->text, pt->len) != 0)
            return 0;
        return match_from(p, part + 1, s + pt->len, prefix, caps, cap);
    }
    for (run = 0; s[run] >= '0' && s[run] <= '9'; run++)
        ;
    /* Unless the next literal starts with a digit, only the whole run can be followed by
     * it, which keeps matching linear for every sensible pattern. */
    shortest = run;
    if (part + 1 < p->n_parts && p->parts[part + 1].text[0] >= '0' && p->parts[part + 1].text[0] <= '9')
        shortest = 1;
    for (len = run; len >= shortest && len >= 1; len--) {
        caps[cap].id = pt->text;
        caps[cap].id_len = pt->len;
        caps[cap].value = s;
        caps[cap].value_len = len;
        caps[cap].shift = 0;
        if (match_from(p, part + 1, s + len, prefix, caps, cap + 1))
            return 1;
    }
    return 0;
}

int ckpt_rules__pattern_match(const map_pattern *p, const char *name, int prefix, map_capture *caps)
{
    return match_from(p, 0, name, prefix, caps, 0);
}

int ckpt_rules__pattern_covered(const map_pattern *p, const map_pattern *by)
{
    size_t i, k;

    for (i = 0; i < p->n_parts; i++) {
        int found = 0;
        if (!p->parts[i].capture)
            continue;
        for (k = 0; k < by->n_parts && !found; k++)
            found = by->parts[k].capture && by->parts[k].len == p->parts[i].len &&
                    memcmp(by->parts[k].text, p->parts[i].text, p->parts[i].len) == 0;
        if (!found)
            return 0;
    }
    return 1;
}

static const map_capture *find_capture(const map_part *pt, const map_capture *caps, size_t n_caps)
{
    size_t i;

    for (i = 0; i < n_caps; i++)
        if (caps[i].id_len == pt->len && memcmp(caps[i].id, pt->text, pt->len) == 0)
            return &caps[i];
    return NULL;
}

/* The digits of c as a number; -1 past 18 digits (no index is that long). */
static int64_t digits_value(const map_capture *c)
{
    int64_t v = 0;
    size_t i;

    if (c->value_len > 18)
        return -1;
    for (i = 0; i < c->value_len; i++)
        v = v * 10 + (c->value[i] - '0');
    return v;
}

static int64_t shift_of(const map_part *pt, const ckpt_map_params *params)
{
    int64_t v = 0;

    if (pt->shift && !ckpt_map_params_get(params, pt->shift, &v))
        return -1;
    return v;
}

int ckpt_rules__pattern_params(const map_pattern *p, const ckpt_map_params *params, const char *rule)
{
    size_t i;

    for (i = 0; i < p->n_parts; i++)
        if (p->parts[i].shift && shift_of(&p->parts[i], params) < 0)
            return ckpt_error_setc(CKPT_ENOTFOUND, CKPT_ERRCLASS_MAP_PARAM,
                                   "rule %s needs model parameter '%s' (pattern \"%s\")", rule, p->parts[i].shift,
                                   p->text);
    return 0;
}

int ckpt_rules__pattern_shift(const map_pattern *p, map_capture *caps, const ckpt_map_params *params, const char *rule)
{
    size_t i, k = 0;
    int rc;

    if ((rc = ckpt_rules__pattern_params(p, params, rule)) < 0)
        return rc;
    for (i = 0; i < p->n_parts; i++) {
        int64_t by, v;
        if (!p->parts[i].capture)
            continue;
        by = shift_of(&p->parts[i], params);
        v = digits_value(&caps[k]);
        if (v < 0 || v < by)
            return 0;
        caps[k++].shift = by;
    }
    return 1;
}

char *ckpt_rules__pattern_expand(ckpt_arena *a, const map_pattern *p, const map_capture *caps, size_t n_caps,
                                 const ckpt_map_params *params)
{
    size_t i, len = 0, pos = 0;
    char *s, (*num)[24];

    if (!(num = ckpt_arena_alloc(a, (p->n_parts ? p->n_parts : 1) * sizeof *num)))
        return NULL;
    for (i = 0; i < p->n_parts; i++) {
        const map_capture *c = p->parts[i].capture ? find_capture(&p->parts[i], caps, n_caps) : NULL;
        CKPT_ASSERT(!p->parts[i].capture || c);
        num[i][0] = '\0';
        if (c && (c->shift || p->parts[i].shift)) {
            int64_t by = shift_of(&p->parts[i], params);
            CKPT_ASSERT(by >= 0);
            snprintf(num[i], sizeof num[i], "%" PRId64, digits_value(c) - c->shift + by);
        }
        len += num[i][0] ? strlen(num[i]) : c ? c->value_len : p->parts[i].len;
    }
    if (!(s = ckpt_arena_alloc(a, len + 1)))
        return NULL;
    for (i = 0; i < p->n_parts; i++) {
        const map_capture *c = p->parts[i].capture ? find_capture(&p->parts[i], caps, n_caps) : NULL;
        const char *src = num[i][0] ? num[i] : c ? c->value : p->parts[i].text;
        size_t n = num[i][0] ? strlen(num[i]) : c ? c->value_len : p->parts[i].len;
        memcpy(s + pos, src, n);
        pos += n;
    }
    s[pos] = '\0';
    return s;
}
