/* What the JSON library does not do: check the exact JSON grammar (cJSON accepts leading
 * zeros, control characters and any byte below 0x21 as whitespace) and UTF-8 well-
 * formedness, and find repeated keys (cJSON keeps both). The reference parser refuses all
 * of these, so a header we accept is one it accepts. */
#include "safetensors_private.h"

#include <stdlib.h>
#include <string.h>

/* serde_json's default recursion limit: 128 nested containers fail. */
#define ST_JSON_MAX_DEPTH 127
/* cJSON copies a number literal into a 64-byte buffer and stops there. */
#define ST_JSON_MAX_NUMBER 63

typedef struct st_lex {
    const uint8_t *s;
    size_t n, pos;
    size_t member; /* index of the top-level member being read */
    ckpt_st_syntax *out;
    const char *why;
    int code;
    const char *unsupported; /* valid JSON we cannot hold, reported once the syntax is known good */
    size_t unsupported_pos;
} st_lex;

static int lex_fail(st_lex *lx, int code, const char *why)
{
    lx->code = code;
    lx->why = why;
    return -1;
}

static void lex_unsupported(st_lex *lx, const char *why)
{
    if (!lx->unsupported) {
        lx->unsupported = why;
        lx->unsupported_pos = lx->pos;
    }
}

static void lex_skip_ws(st_lex *lx)
{
    while (lx->pos < lx->n) {
        uint8_t c = lx->s[lx->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        lx->pos++;
    }
}

static int is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

/* Four hex digits after "\u" at pos; leaves pos on the last digit. */
static int lex_hex4(st_lex *lx, unsigned *out)
{
    unsigned v = 0;
    size_t i;

    if (lx->n - lx->pos < 5)
        return lex_fail(lx, CKPT_EFORMAT, "truncated \\u escape");
    for (i = 1; i <= 4; i++) {
        uint8_t c = lx->s[lx->pos + i];
        unsigned d;
        if (is_digit(c))
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return lex_fail(lx, CKPT_EFORMAT, "invalid hex digit in \\u escape");
        v = v * 16 + d;
    }
    lx->pos += 4;
    *out = v;
    return 0;
}

static int lex_unicode_escape(st_lex *lx)
{
    unsigned u, low;

    if (lex_hex4(lx, &u) < 0)
        return -1;
    if (u == 0)
        lex_unsupported(lx, "\\u0000 (NUL) in a string is not supported");
    if (u >= 0xDC00 && u <= 0xDFFF)
        return lex_fail(lx, CKPT_EFORMAT, "lone low surrogate in \\u escape");
    if (u < 0xD800 || u > 0xDBFF)
        return 0;
    if (lx->n - lx->pos < 3 || lx->s[lx->pos + 1] != '\\' || lx->s[lx->pos + 2] != 'u')
        return lex_fail(lx, CKPT_EFORMAT, "lone high surrogate in \\u escape");
    lx->pos += 2;
    if (lex_hex4(lx, &low) < 0)
        return -1;
    if (low < 0xDC00 || low > 0xDFFF)
        return lex_fail(lx, CKPT_EFORMAT, "high surrogate not followed by a low surrogate");
    return 0;
}

/* A string at pos (on the opening quote); raw and raw_len get the bytes between the quotes. */
static int lex_string(st_lex *lx, const uint8_t **raw, size_t *raw_len)
{
    size_t start = ++lx->pos;

    for (;;) {
        uint8_t c;
        if (lx->pos >= lx->n)
            return lex_fail(lx, CKPT_EFORMAT, "unterminated string");
        c = lx->s[lx->pos];
        if (c == '"')
            break;
        if (c < 0x20)
            return lex_fail(lx, CKPT_EFORMAT, "control character in a string");
        if (c == '\\') {
            if (++lx->pos >= lx->n)
                return lex_fail(lx, CKPT_EFORMAT, "unterminated string");
            c = lx->s[lx->pos];
            if (c == 'u') {
                if (lex_unicode_escape(lx) < 0)
                    return -1;
            } else if (!memchr("\"\\/bfnrt", c, 8)) {
                return lex_fail(lx, CKPT_EFORMAT, "invalid escape in a string");
            }
        }
        lx->pos++;
    }
    *raw = lx->s + start;
    *raw_len = lx->pos - start;
    lx->pos++;
    return 0;
}

/* A number at pos. `int_field` names the field when the number must be a size or offset. */
static int lex_number(st_lex *lx, const char *int_field)
{
    const uint64_t limit = (uint64_t)1 << 53;
    size_t start = lx->pos;
    uint64_t v = 0;
    int plain = 1, big = 0;

    if (lx->s[lx->pos] == '-') {
        plain = 0;
        lx->pos++;
    }
    if (lx->pos >= lx->n || !is_digit(lx->s[lx->pos]))
        return lex_fail(lx, CKPT_EFORMAT, "invalid number");
    if (lx->s[lx->pos] == '0') {
        if (++lx->pos < lx->n && is_digit(lx->s[lx->pos]))
            return lex_fail(lx, CKPT_EFORMAT, "leading zero in a number");
    } else {
        while (lx->pos < lx->n && is_digit(lx->s[lx->pos])) {
            if (!big) {
                v = v * 10 + (uint64_t)(lx->s[lx->pos] - '0');
                big = v > limit;
            }
            lx->pos++;
        }
    }
    if (lx->pos < lx->n && lx->s[lx->pos] == '.') {
        plain = 0;
        lx->pos++;
        if (lx->pos >= lx->n || !is_digit(lx->s[lx->pos]))
            return lex_fail(lx, CKPT_EFORMAT, "invalid number");
        while (lx->pos < lx->n && is_digit(lx->s[lx->pos]))
            lx->pos++;
    }
    if (lx->pos < lx->n && (lx->s[lx->pos] == 'e' || lx->s[lx->pos] == 'E')) {
        plain = 0;
        lx->pos++;
        if (lx->pos < lx->n && (lx->s[lx->pos] == '+' || lx->s[lx->pos] == '-'))
            lx->pos++;
        if (lx->pos >= lx->n || !is_digit(lx->s[lx->pos]))
            return lex_fail(lx, CKPT_EFORMAT, "invalid number");
        while (lx->pos < lx->n && is_digit(lx->s[lx->pos]))
            lx->pos++;
    }
    if (lx->pos - start > ST_JSON_MAX_NUMBER)
        lex_unsupported(lx, "a number literal longer than 63 characters is not supported");
    if (int_field && (!plain || big) && lx->out->bad_member == SIZE_MAX) {
        lx->out->bad_member = lx->member;
        lx->out->bad_field = int_field;
        lx->out->bad_above = plain;
    }
    return 0;
}

static int lex_literal(st_lex *lx, const char *word)
{
    size_t len = strlen(word);

    if (lx->n - lx->pos < len || memcmp(lx->s + lx->pos, word, len) != 0)
        return lex_fail(lx, CKPT_EFORMAT, "unexpected character");
    lx->pos += len;
    return 0;
}

static int lex_value(st_lex *lx, unsigned level, const char *num_field, const char *array_field);

/* The field whose array holds sizes or offsets, for a key of a tensor entry. */
static const char *int_array_field(const uint8_t *key, size_t len)
{
    if (len == 5 && memcmp(key, "shape", 5) == 0)
        return "shape";
    if (len == 12 && memcmp(key, "data_offsets", 12) == 0)
        return "data_offsets";
    return NULL;
}

static int lex_object(st_lex *lx, unsigned level)
{
    size_t index = 0;

    lx->pos++;
    lex_skip_ws(lx);
    if (lx->pos < lx->n && lx->s[lx->pos] == '}') {
        lx->pos++;
        return 0;
    }
    for (;; index++) {
        const uint8_t *key;
        size_t key_len;

        lex_skip_ws(lx);
        if (lx->pos >= lx->n || lx->s[lx->pos] != '"')
            return lex_fail(lx, CKPT_EFORMAT, "expected a string key");
        if (lex_string(lx, &key, &key_len) < 0)
            return -1;
        lex_skip_ws(lx);
        if (lx->pos >= lx->n || lx->s[lx->pos] != ':')
            return lex_fail(lx, CKPT_EFORMAT, "expected ':'");
        lx->pos++;
        if (level == 1)
            lx->member = index;
        if (lex_value(lx, level + 1, NULL, level == 2 ? int_array_field(key, key_len) : NULL) < 0)
            return -1;
        lex_skip_ws(lx);
        if (lx->pos < lx->n && lx->s[lx->pos] == ',') {
            lx->pos++;
            continue;
        }
        if (lx->pos < lx->n && lx->s[lx->pos] == '}') {
            lx->pos++;
            return 0;
        }
        return lex_fail(lx, CKPT_EFORMAT, "expected ',' or '}'");
    }
}

static int lex_array(st_lex *lx, unsigned level, const char *elem_field)
{
    lx->pos++;
    lex_skip_ws(lx);
    if (lx->pos < lx->n && lx->s[lx->pos] == ']') {
        lx->pos++;
        return 0;
    }
    for (;;) {
        if (lex_value(lx, level + 1, elem_field, NULL) < 0)
            return -1;
        lex_skip_ws(lx);
        if (lx->pos < lx->n && lx->s[lx->pos] == ',') {
            lx->pos++;
            continue;
        }
        if (lx->pos < lx->n && lx->s[lx->pos] == ']') {
            lx->pos++;
            return 0;
        }
        return lex_fail(lx, CKPT_EFORMAT, "expected ',' or ']'");
    }
}

/* A value at pos; a container starting here is at nesting `level`. */
static int lex_value(st_lex *lx, unsigned level, const char *num_field, const char *array_field)
{
    const uint8_t *raw;
    size_t raw_len;

    lex_skip_ws(lx);
    if (lx->pos >= lx->n)
        return lex_fail(lx, CKPT_EFORMAT, "unexpected end of input");
    switch (lx->s[lx->pos]) {
    case '{':
        if (level > ST_JSON_MAX_DEPTH)
            return lex_fail(lx, CKPT_EFORMAT, "nesting deeper than 127 levels");
        return lex_object(lx, level);
    case '[':
        if (level > ST_JSON_MAX_DEPTH)
            return lex_fail(lx, CKPT_EFORMAT, "nesting deeper than 127 levels");
        return lex_array(lx, level, array_field);
    case '"':
        return lex_string(lx, &raw, &raw_len);
    case 't':
        return lex_literal(lx, "true");
    case 'f':
        return lex_literal(lx, "false");
    case 'n':
        return lex_literal(lx, "null");
    default:
        if (lx->s[lx->pos] == '-' || is_digit(lx->s[lx->pos]))
            return lex_number(lx, num_field);
        return lex_fail(lx, CKPT_EFORMAT, "unexpected character");
    }
}

int ckpt_safetensors__json_check(const char *path, const char *what, const uint8_t *s, size_t n,
                                 ckpt_st_syntax *out)
{
    st_lex lx;

    memset(&lx, 0, sizeof lx);
    lx.s = s;
    lx.n = n;
    lx.out = out;
    out->bad_member = SIZE_MAX;
    out->bad_field = NULL;
    out->bad_above = 0;
    if (lex_value(&lx, 1, NULL, NULL) == 0) {
        lex_skip_ws(&lx);
        if (lx.pos == n && !lx.unsupported)
            return 0;
        if (lx.pos == n)
            return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: safetensors: %s (%s byte %zu)", path, lx.unsupported, what,
                                  lx.unsupported_pos);
        lex_fail(&lx, CKPT_EFORMAT, "characters after the JSON value");
    }
    return ckpt_error_set(lx.code, "%s: safetensors: invalid JSON in %s: %s at byte %zu", path, what, lx.why,
                          lx.pos);
}

int ckpt_safetensors__utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        uint8_t c = s[i];
        size_t len, k;
        uint32_t cp, min;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1Fu;
            min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0Fu;
            min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07u;
            min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

int ckpt_safetensors__names_build(ckpt_st_names *ix, const char *const *names, size_t n, int64_t *dup)
{
    size_t i;
    int rc;

    memset(ix, 0, sizeof *ix);
    *dup = -1;
    if ((rc = ckpt_strmap_reserve(&ix->map, n)) < 0)
        return rc;
    for (i = 0; i < n; i++) {
        if ((rc = ckpt_strmap_add(&ix->map, names[i], strlen(names[i]), i, NULL)) < 0)
            return rc;
        if (rc == 1) {
            *dup = (int64_t)i;
            break;
        }
    }
    return 0;
}

int64_t ckpt_safetensors__names_find(const ckpt_st_names *ix, const char *name)
{
    uint64_t i;

    return ckpt_strmap_get(&ix->map, name, strlen(name), &i) ? (int64_t)i : -1;
}

void ckpt_safetensors__names_free(ckpt_st_names *ix)
{
    if (ix)
        ckpt_strmap_dispose(&ix->map);
}
