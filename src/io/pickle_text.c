/* Text inside pickles: UTF-8 validation, latin-1 conversion, and the protocol-0
 * arguments (quoted py2 strings, raw-unicode-escape, decimal numbers). */
#include "pickle_private.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

/* Python refuses longer decimal integers (sys.int_info.default_max_str_digits). */
#define MAX_INT_DIGITS 4300
#define MAX_FLOAT_TEXT 256
#define MAX_UNICODE 0x10FFFFu

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LITTLE_ENDIAN_WORDS 1
#else
#define LITTLE_ENDIAN_WORDS 0
#endif

/* UTF-8 validation as a table-driven automaton: byte classes, then one transition per
 * byte. States 0-7 are "accepting" (0) or "inside a sequence"; 8 rejects, 9 is the start
 * of an encoded surrogate (ED A0..BF), which Python strings may hold but UTF-8 may not. */
enum { ST_ACCEPT = 0, ST_REJECT = 8, ST_SURROGATE = 9 };

static const uint8_t byte_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 80-9F */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, /* A0-BF */
    4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* C0-DF */
    6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 7, 9, 10, 10, 10, 11, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
};

/* By class: ASCII, 80-8F, 90-9F, A0-BF, invalid, C2-DF, E0, E1-EC/EE-EF, ED, F0, F1-F3, F4. */
static const uint8_t transition[10][12] = {
    { 0, 8, 8, 8, 8, 1, 3, 2, 4, 6, 5, 7 }, /* between characters */
    { 8, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8 }, /* one continuation byte left */
    { 8, 1, 1, 1, 8, 8, 8, 8, 8, 8, 8, 8 }, /* two left */
    { 8, 8, 8, 1, 8, 8, 8, 8, 8, 8, 8, 8 }, /* after E0: A0-BF, no overlong forms */
    { 8, 1, 1, 9, 8, 8, 8, 8, 8, 8, 8, 8 }, /* after ED: 80-9F, A0-BF would be a surrogate */
    { 8, 2, 2, 2, 8, 8, 8, 8, 8, 8, 8, 8 }, /* three left */
    { 8, 8, 2, 2, 8, 8, 8, 8, 8, 8, 8, 8 }, /* after F0: 90-BF */
    { 8, 2, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8 }, /* after F4: 80-8F, nothing past U+10FFFF */
    { 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8 },
    { 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9 },
};

static int ascii64(const uint8_t *p)
{
    uint64_t w[8], any = 0;
    int k;

    memcpy(w, p, sizeof w);
    for (k = 0; k < 8; k++)
        any |= w[k];
    return (any & 0x8080808080808080ull) == 0;
}

#define HIGH_BITS 0x8080808080808080ull
#define LOW7_BITS 0x7F7F7F7F7F7F7F7Full

/* Text of code points below 256 (the payload of protocol-2 bytes, often gigabytes) eight
 * bytes at a time: every byte is ASCII, a lead C2/C3, or a continuation right after a
 * lead. Stops at the first word that is anything else; *lead says whether the last byte
 * taken was a lead still waiting for its continuation. */
static size_t latin1_words(const uint8_t *p, size_t n, size_t *count, int *lead)
{
    size_t i = 0;
    uint64_t carry = (uint64_t)*lead << 7;

    for (; i + 8 <= n; i += 8) {
        uint64_t w, cont, t, leads;
        memcpy(&w, p + i, sizeof w);
        if (!(w & HIGH_BITS)) {
            if (carry)
                break;
            *count += 8;
            continue;
        }
        cont = w & ~(w << 1) & HIGH_BITS;
        t = (w ^ 0xC2C2C2C2C2C2C2C2ull) & 0xFEFEFEFEFEFEFEFEull;
        leads = ~(((t & LOW7_BITS) + LOW7_BITS) | t | LOW7_BITS);
        if ((w & HIGH_BITS & ~(cont | leads)) || cont != ((leads << 8) | carry))
            break;
        *count += 8 - (size_t)__builtin_popcountll(cont);
        carry = (leads >> 56) & 0x80;
    }
    *lead = carry != 0;
    return i;
}

/* The latin-1 fast path first, then blocks of 64 bytes: pure ASCII ones are skipped
 * between characters, others run through the automaton without a branch per byte.
 * Rejecting states never leave, so checking once per block is enough. */
int ckpt_pickle__utf8_scan(const uint8_t *p, size_t n, size_t *chars, unsigned *max_byte, const char **why)
{
    size_t i, count = 0;
    unsigned state, high = 0;
    int lead = 0;

    /* Little-endian word loads put byte k in bits 8k..8k+7, as the shifts above assume. */
    if (LITTLE_ENDIAN_WORDS)
        i = latin1_words(p, n, &count, &lead);
    else
        i = 0;
    state = lead ? 1 : ST_ACCEPT;
    while (i < n && state < ST_REJECT) {
        size_t end = n - i > 64 ? i + 64 : n;
        if (state == ST_ACCEPT && end - i == 64 && ascii64(p + i)) {
            i += 64;
            count += 64;
            continue;
        }
        for (; i < end; i++) {
            uint8_t b = p[i];
            count += (b & 0xC0) != 0x80;
            high |= b > 0xC3;
            state = transition[state][byte_class[b]];
        }
    }
    if (state == ST_SURROGATE) {
        *why = "string holds a lone surrogate, which has no UTF-8 form";
        return CKPT_EUNSUPPORTED;
    }
    if (state != ST_ACCEPT) {
        *why = "invalid UTF-8 in string";
        return CKPT_EFORMAT;
    }
    *chars = count;
    *max_byte = high ? 0xFF : 0x7F;
    return 0;
}

int ckpt_pickle__utf8_check(const uint8_t *p, size_t n, const char **why)
{
    size_t chars;
    unsigned top;
    return ckpt_pickle__utf8_scan(p, n, &chars, &top, why);
}

size_t ckpt_pickle__latin1_len(const uint8_t *p, size_t n)
{
    const char *why;
    size_t chars;
    unsigned top;

    /* Lead bytes above C3 start code points of 256 and more. */
    if (ckpt_pickle__utf8_scan(p, n, &chars, &top, &why) != 0 || top > 0xC3)
        return SIZE_MAX;
    return chars;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* An arena buffer for at most `factor` output bytes per input byte, plus the NUL. */
static char *alloc_out(ckpt_arena *a, size_t n, size_t factor)
{
    size_t size;

    if (CKPT_MUL_OVERFLOWS(n, factor, &size) || CKPT_ADD_OVERFLOWS(size, (size_t)1, &size)) {
        ckpt_error_oom();
        return NULL;
    }
    return ckpt_arena_alloc(a, size);
}

int ckpt_pickle__latin1_to_utf8(ckpt_arena *a, const uint8_t *p, size_t n, char **out, size_t *out_len)
{
    char *o = alloc_out(a, n, 2);
    size_t i, len = 0;

    if (!o)
        return CKPT_ENOMEM;
    for (i = 0; i < n; i++)
        len += put_utf8(o + len, p[i]);
    o[len] = '\0';
    *out = o;
    *out_len = len;
    return 0;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Python's bytes escape decoding: the escapes of a py2 str literal. Writes at most n bytes. */
static int unescape(const uint8_t *p, size_t n, uint8_t *o, size_t *o_len, const char **why)
{
    size_t i = 0, len = 0;

    while (i < n) {
        uint8_t c = p[i++];
        unsigned v;
        int k, h1, h2;

        if (c != '\\') {
            o[len++] = c;
            continue;
        }
        if (i == n) {
            *why = "STRING ends with a lone backslash";
            return CKPT_EFORMAT;
        }
        c = p[i++];
        switch (c) {
        case '\n': break;
        case '\\': case '\'': case '"': o[len++] = c; break;
        case 'b': o[len++] = '\b'; break;
        case 'f': o[len++] = '\f'; break;
        case 't': o[len++] = '\t'; break;
        case 'n': o[len++] = '\n'; break;
        case 'r': o[len++] = '\r'; break;
        case 'v': o[len++] = '\v'; break;
        case 'a': o[len++] = '\a'; break;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7':
            v = (unsigned)(c - '0');
            for (k = 0; k < 2 && i < n && p[i] >= '0' && p[i] <= '7'; k++)
                v = v * 8 + (unsigned)(p[i++] - '0');
            o[len++] = (uint8_t)v;
            break;
        case 'x':
            if (n - i < 2 || (h1 = hexval(p[i])) < 0 || (h2 = hexval(p[i + 1])) < 0) {
                *why = "invalid \\x escape in STRING";
                return CKPT_EFORMAT;
            }
            o[len++] = (uint8_t)(h1 * 16 + h2);
            i += 2;
            break;
        default:
            o[len++] = '\\';
            o[len++] = c;
            break;
        }
    }
    *o_len = len;
    return 0;
}

int ckpt_pickle__decode_string(ckpt_arena *a, const uint8_t *p, size_t n, char **out, size_t *out_len,
                               const char **why)
{
    uint8_t *tmp;
    size_t len;
    int rc;

    if (n < 2 || p[0] != p[n - 1] || (p[0] != '\'' && p[0] != '"')) {
        *why = "STRING argument is not quoted";
        return CKPT_EFORMAT;
    }
    tmp = malloc(n);
    if (!tmp)
        return ckpt_error_oom();
    rc = unescape(p + 1, n - 2, tmp, &len, why);
    if (rc == 0)
        rc = ckpt_pickle__latin1_to_utf8(a, tmp, len, out, out_len);
    free(tmp);
    return rc;
}

int ckpt_pickle__decode_raw_unicode(ckpt_arena *a, const uint8_t *p, size_t n, char **out, size_t *out_len,
                                    const char **why)
{
    char *o = alloc_out(a, n, 2);
    size_t i = 0, len = 0;

    if (!o)
        return CKPT_ENOMEM;
    while (i < n) {
        uint8_t c = p[i++];
        uint32_t cp = 0;
        int count, h;

        if (c != '\\' || i == n) {
            len += put_utf8(o + len, c);
            continue;
        }
        c = p[i++];
        if (c != 'u' && c != 'U') {
            o[len++] = '\\';
            len += put_utf8(o + len, c);
            continue;
        }
        for (count = c == 'u' ? 4 : 8; count; count--, i++) {
            if (i == n || (h = hexval(p[i])) < 0) {
                *why = "truncated \\u escape in UNICODE";
                return CKPT_EFORMAT;
            }
            cp = cp << 4 | (uint32_t)h;
        }
        if (cp > MAX_UNICODE) {
            *why = "\\U escape out of range in UNICODE";
            return CKPT_EFORMAT;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            *why = "string holds a lone surrogate, which has no UTF-8 form";
            return CKPT_EUNSUPPORTED;
        }
        len += put_utf8(o + len, cp);
    }
    o[len] = '\0';
    *out = o;
    *out_len = len;
    return 0;
}

/* Decimal digits too large for int64, as minimal two's complement little-endian bytes. */
static int big_from_decimal(ckpt_arena *a, const uint8_t *d, size_t nd, int neg, uint8_t **big, size_t *big_len)
{
    uint32_t limbs[MAX_INT_DIGITS / 9 + 2];
    size_t nl = 1, i, k, nb;
    uint8_t *b;
    unsigned carry;

    limbs[0] = 0;
    for (i = 0; i < nd; i++) {
        uint64_t c = (uint64_t)(d[i] - '0');
        for (k = 0; k < nl; k++) {
            uint64_t t = (uint64_t)limbs[k] * 10 + c;
            limbs[k] = (uint32_t)t;
            c = t >> 32;
        }
        if (c)
            limbs[nl++] = (uint32_t)c;
    }
    nb = nl * 4 + 1;
    b = ckpt_arena_alloc(a, nb);
    if (!b)
        return CKPT_ENOMEM;
    for (i = 0; i < nl * 4; i++)
        b[i] = (uint8_t)(limbs[i / 4] >> (8 * (i % 4)));
    b[nb - 1] = 0;
    if (neg) {
        carry = 1;
        for (i = 0; i < nb; i++) {
            unsigned v = (unsigned)(uint8_t)~b[i] + carry;
            b[i] = (uint8_t)v;
            carry = v >> 8;
        }
    }
    while (nb > 1 && ((b[nb - 1] == 0x00 && !(b[nb - 2] & 0x80)) || (b[nb - 1] == 0xFF && (b[nb - 2] & 0x80))))
        nb--;
    *big = b;
    *big_len = nb;
    return 1;
}

int ckpt_pickle__parse_int(ckpt_arena *a, const uint8_t *p, size_t n, int64_t *i, uint8_t **big,
                           size_t *big_len, const char **why)
{
    size_t k = 0, start;
    uint64_t mag = 0;
    int neg = 0, overflow = 0;

    if (n && p[n - 1] == 'L')
        n--;
    while (k < n && p[k] == ' ')
        k++;
    if (k < n && (p[k] == '-' || p[k] == '+'))
        neg = p[k++] == '-';
    start = k;
    for (; k < n && p[k] >= '0' && p[k] <= '9'; k++) {
        if (mag > (UINT64_MAX - 9) / 10)
            overflow = 1;
        else
            mag = mag * 10 + (uint64_t)(p[k] - '0');
    }
    if (k == start || k != n) {
        *why = "malformed integer text";
        return CKPT_EFORMAT;
    }
    if (k - start > MAX_INT_DIGITS) {
        *why = "integer text longer than 4300 digits";
        return CKPT_EFORMAT;
    }
    if (!overflow && !neg && mag <= (uint64_t)INT64_MAX) {
        *i = (int64_t)mag;
        return 0;
    }
    if (!overflow && neg && mag <= (uint64_t)INT64_MAX + 1) {
        *i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
        return 0;
    }
    return big_from_decimal(a, p + start, k - start, neg, big, big_len);
}

int ckpt_pickle__parse_float(const uint8_t *p, size_t n, double *out, const char **why)
{
    char buf[MAX_FLOAT_TEXT + 16], *end;
    const char *dp = localeconv()->decimal_point;
    size_t dpl = strlen(dp), i, len = 0;
    int point = 0;

    if (n > MAX_FLOAT_TEXT || dpl > 15) {
        *why = "float text too long";
        return CKPT_EFORMAT;
    }
    /* strtod follows the locale; pickles always use '.'. */
    for (i = 0; i < n; i++) {
        if (p[i] == '.' && !point) {
            memcpy(buf + len, dp, dpl);
            len += dpl;
            point = 1;
        } else if (p[i] == '\0' || p[i] == ',' || p[i] == '.') {
            *why = "malformed float text";
            return CKPT_EFORMAT;
        } else {
            buf[len++] = (char)p[i];
        }
    }
    buf[len] = '\0';
    *out = strtod(buf, &end);
    while (*end == ' ')
        end++;
    if (end == buf || *end != '\0') {
        *why = "malformed float text";
        return CKPT_EFORMAT;
    }
    return 0;
}

int ckpt_pickle__parse_index(const uint8_t *p, size_t n, uint64_t *out, const char **why)
{
    uint64_t v = 0;
    size_t k;

    for (k = 0; k < n; k++) {
        if (p[k] < '0' || p[k] > '9' || v > (UINT64_MAX - 9) / 10) {
            *why = "malformed memo index";
            return CKPT_EFORMAT;
        }
        v = v * 10 + (uint64_t)(p[k] - '0');
    }
    if (n == 0) {
        *why = "malformed memo index";
        return CKPT_EFORMAT;
    }
    *out = v;
    return 0;
}
