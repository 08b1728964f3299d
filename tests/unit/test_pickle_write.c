/* The pickle writer: every fixture survives read -> write -> read at protocols 2 and 4
 * with the same tree and sharing, real CPython loads what we write as the same objects,
 * output is deterministic, and holes land where the stream says. */
#include "test.h"
#include "value_dump.h"

#include <ckpt/sys/pickle.h>

#include <stdlib.h>
#include <unistd.h>

#ifndef CKPT_TEST_PYTHON
#define CKPT_TEST_PYTHON "/usr/bin/python3"
#endif

/* ---- helpers ---------------------------------------------------------------------- */

typedef struct sink {
    uint8_t *buf;
    uint64_t size, next;
    int contiguous;
} sink;

/* Runs arrive in order; the gap before each is a hole. */
static int sink_write(uint64_t offset, const void *data, size_t len, void *payload)
{
    sink *s = payload;
    if (offset < s->next || offset + len > s->size)
        s->contiguous = 0;
    else
        memcpy(s->buf + offset, data, len);
    s->next = offset + len;
    return 0;
}

/* The finished stream of a pickler with holes zero-filled; caller frees. */
static uint8_t *stream_of(const ckpt_pickler *p, size_t *len)
{
    sink s;

    s.size = ckpt_pickler_size(p);
    s.buf = calloc(1, (size_t)s.size + 1);
    s.next = 0;
    s.contiguous = 1;
    if (!s.buf || ckpt_pickler_emit(p, sink_write, &s) != 0 || !s.contiguous) {
        free(s.buf);
        return NULL;
    }
    *len = (size_t)s.size;
    return s.buf;
}

static int write_tree(const ckpt_value *v, int proto, ckpt_pickler_tensor_fn fn, void *payload, uint8_t **out,
                      size_t *len, ckpt_pickler **keep)
{
    ckpt_pickler *p;
    int rc;

    *out = NULL;
    *len = 0;
    if ((rc = ckpt_pickler_new(&p, proto, fn, payload)) != 0)
        return rc;
    if ((rc = ckpt_pickler_begin(p)) == 0 && (rc = ckpt_pickler_value(p, v)) == 0 && (rc = ckpt_pickler_end(p)) == 0 &&
        !(*out = stream_of(p, len)))
        rc = CKPT_ERROR;
    if (keep && rc == 0)
        *keep = p;
    else
        ckpt_pickler_free(p);
    return rc;
}

static int dump_of(const ckpt_value *v, ckpt_buf *out)
{
    ckpt_buf_clear(out);
    return ckpt_test_dump(v, 1, out);
}

typedef struct fixture {
    char name[128];
    uint8_t *data;
    size_t len;
} fixture;

/* The fixture names listed in pickle/expected.txt. */
static int list_fixtures(fixture **out)
{
    size_t len;
    char *text = (char *)ckpt_test_read_file(ckpt_test_data("pickle/expected.txt"), &len), *line, *next;
    fixture *f = NULL;
    char path[256];
    int n = 0;

    if (!text)
        return -1;
    text[len] = '\0';
    for (line = text; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = '\0';
        if (line[0] == '#' || !strchr(line, '\t'))
            continue;
        f = realloc(f, (size_t)(n + 1) * sizeof *f);
        *strchr(line, '\t') = '\0';
        snprintf(f[n].name, sizeof f[n].name, "%s", line);
        snprintf(path, sizeof path, "pickle/%s", line);
        f[n].data = ckpt_test_read_file(ckpt_test_data(path), &f[n].len);
        if (!f[n].data) {
            free(text);
            return -1;
        }
        n++;
    }
    free(text);
    *out = f;
    return n;
}

static void free_fixtures(fixture *f, int n)
{
    int i;
    for (i = 0; i < n; i++)
        free(f[i].data);
    free(f);
}

/* ---- round trips ------------------------------------------------------------------ */

CKPT_TEST(test_pickle_write_round_trips_every_fixture)
{
    fixture *fx;
    int n = list_fixtures(&fx), i, proto;
    ckpt_buf before = CKPT_BUF_INIT, after = CKPT_BUF_INIT;

    ASSERT_TRUE(n > 60);
    for (i = 0; i < n; i++) {
        ckpt_arena *a;
        ckpt_value *v, *back;

        ASSERT_OK(ckpt_arena_new(&a));
        ASSERT_OK(ckpt_pickle_read(&v, NULL, a, fx[i].data, fx[i].len, NULL));
        ASSERT_OK(dump_of(v, &before));
        for (proto = 2; proto <= 4; proto += 2) {
            uint8_t *out, *again;
            size_t len, len2;

            ASSERT_OK(write_tree(v, proto, NULL, NULL, &out, &len, NULL));
            ASSERT_OK(write_tree(v, proto, NULL, NULL, &again, &len2, NULL));
            if (len != len2 || memcmp(out, again, len) != 0)
                ckpt_test_fail(__FILE__, __LINE__, "%s: protocol %d output is not deterministic", fx[i].name, proto);
            if (ckpt_pickle_read(&back, NULL, a, out, len, NULL) != 0 || dump_of(back, &after) != 0 ||
                strcmp((char *)before.data, (char *)after.data) != 0)
                ckpt_test_fail(__FILE__, __LINE__, "%s protocol %d: %s\n    before %.300s\n    after  %.300s",
                               fx[i].name, proto, ckpt_error_last()->message, before.data,
                               after.data ? (char *)after.data : "");
            ASSERT_EQ_INT(out[0], 0x80);
            ASSERT_EQ_INT(out[1], proto);
            free(out);
            free(again);
        }
        ckpt_arena_free(a);
    }
    ckpt_buf_dispose(&before);
    ckpt_buf_dispose(&after);
    free_fixtures(fx, n);
}

static const char check_script[] =
    "import pickle, sys\n"
    "sys.path.insert(0, sys.argv[2])\n"
    "bad = n = 0\n"
    "for line in open(sys.argv[1]):\n"
    "    orig, ours = line.rstrip('\\n').split('\\t')\n"
    "    a = pickle.load(open(orig, 'rb'))\n"
    "    b = pickle.load(open(ours, 'rb'))\n"
    "    n += 1\n"
    "    if pickle.dumps(a, 4) != pickle.dumps(b, 4):\n"
    "        bad += 1\n"
    "        print('mismatch:', orig, ours, repr(a)[:200], repr(b)[:200])\n"
    "print(n, 'pairs compared,', bad, 'mismatches')\n"
    "sys.exit(1 if bad or n == 0 else 0)\n";

/* Python loads each pair listed in pairs.txt (expected, ours) to equal objects. */
static int python_compares(void)
{
    char cmd[4096], gen[2048];
    const char *python = getenv("CKPT_TEST_PYTHON") ? getenv("CKPT_TEST_PYTHON") : CKPT_TEST_PYTHON;

    ckpt_test_write_file("check.py", check_script, sizeof check_script - 1);
    snprintf(gen, sizeof gen, "%s", ckpt_test_data("gen"));
    snprintf(cmd, sizeof cmd, "'%s' check.py pairs.txt '%s'", python, gen);
    return system(cmd);
}

CKPT_TEST(test_pickle_write_loads_in_cpython)
{
    fixture *fx;
    int n = list_fixtures(&fx), i, proto;
    FILE *pairs = fopen("pairs.txt", "w");
    char cwd[1024];

    ASSERT_TRUE(n > 60 && pairs != NULL);
    ASSERT_TRUE(getcwd(cwd, sizeof cwd) != NULL);
    for (i = 0; i < n; i++) {
        ckpt_arena *a;
        ckpt_value *v;

        /* This one calls os.system when loaded: never give it to a real unpickler. */
        if (strncmp(fx[i].name, "shell.", 6) == 0)
            continue;
        ASSERT_OK(ckpt_arena_new(&a));
        ASSERT_OK(ckpt_pickle_read(&v, NULL, a, fx[i].data, fx[i].len, NULL));
        for (proto = 2; proto <= 4; proto += 2) {
            char name[256], orig[256];
            uint8_t *out;
            size_t len;

            ASSERT_OK(write_tree(v, proto, NULL, NULL, &out, &len, NULL));
            snprintf(name, sizeof name, "%s.ours%d", fx[i].name, proto);
            ckpt_test_write_file(name, out, len);
            snprintf(orig, sizeof orig, "pickle/%s", fx[i].name);
            fprintf(pairs, "%s\t%s/%s\n", ckpt_test_data(orig), cwd, name);
            free(out);
        }
        ckpt_arena_free(a);
    }
    fclose(pairs);
    ASSERT_EQ_INT(python_compares(), 0);
    free_fixtures(fx, n);
}

/* CPython's protocol-2 output, memo entries and batches included, is what torch.save
 * writes; reading it and writing it again gives the same bytes. */
CKPT_TEST(test_pickle_write_protocol2_matches_cpython_bytes)
{
    fixture *fx;
    int n = list_fixtures(&fx), i, compared = 0;

    ASSERT_TRUE(n > 60);
    for (i = 0; i < n; i++) {
        size_t outlen;
        uint8_t *out;
        ckpt_arena *a;
        ckpt_value *v;

        if (!strstr(fx[i].name, ".p2."))
            continue;
        ASSERT_OK(ckpt_arena_new(&a));
        ASSERT_OK(ckpt_pickle_read(&v, NULL, a, fx[i].data, fx[i].len, NULL));
        ASSERT_OK(write_tree(v, 2, NULL, NULL, &out, &outlen, NULL));
        if (outlen != fx[i].len || memcmp(out, fx[i].data, outlen) != 0)
            ckpt_test_fail(__FILE__, __LINE__, "%s: protocol 2 output differs from CPython's", fx[i].name);
        compared++;
        free(out);
        ckpt_arena_free(a);
    }
    ASSERT_TRUE(compared >= 15);
    free_fixtures(fx, n);
}

static const char assert_script[] =
    "import pickle, sys\n"
    "for line in open(sys.argv[1]):\n"
    "    path, expr = line.rstrip('\\n').split('\\t')\n"
    "    x = pickle.load(open(path, 'rb'))\n"
    "    assert eval(expr), (path, expr, x)\n"
    "print('ok')\n";

/* Python loads each file listed in checks.txt and the expression next to it holds. */
static int python_asserts(void)
{
    char cmd[2048];
    const char *python = getenv("CKPT_TEST_PYTHON") ? getenv("CKPT_TEST_PYTHON") : CKPT_TEST_PYTHON;

    ckpt_test_write_file("asserts.py", assert_script, sizeof assert_script - 1);
    snprintf(cmd, sizeof cmd, "'%s' asserts.py checks.txt", python);
    return system(cmd);
}

/* ---- holes ------------------------------------------------------------------------- */

static const uint8_t data0[] = { '0', '1', '2', '3', '4', '5', '6', '7', '8', '9' };
static const uint8_t data1[] = { 0x80, 0xFF, 'x', 0x00 };

typedef struct hole_ctx {
    int inline_data;
} hole_ctx;

/* The UTF-8 text of latin-1 bytes: what a protocol-2 bytes hole holds. */
static size_t latin1_utf8(const uint8_t *b, size_t n, uint8_t *out)
{
    size_t i, len = 0;
    for (i = 0; i < n; i++) {
        if (b[i] < 0x80) {
            if (out)
                out[len] = b[i];
            len++;
        } else {
            if (out) {
                out[len] = (uint8_t)(0xC0 | (b[i] >> 6));
                out[len + 1] = (uint8_t)(0x80 | (b[i] & 0x3F));
            }
            len += 2;
        }
    }
    return len;
}

/* Tensor 0 becomes ('tensor', 0, <data>), tensor 1 ('tensor', 1, <data>, None): the
 * data either inline or as a hole. */
static int tensor_cb(ckpt_pickler *p, const ckpt_value *t, void *payload)
{
    hole_ctx *c = payload;
    size_t i = t->u.tensor.index;
    const uint8_t *d = i ? data1 : data0;
    size_t n = i ? sizeof data1 : sizeof data0;
    int rc;

    if ((rc = ckpt_pickler_mark(p)) || (rc = ckpt_pickler_str(p, "tensor", 6)) ||
        (rc = ckpt_pickler_int(p, (int64_t)i)))
        return rc;
    if (c->inline_data)
        rc = ckpt_pickler_bytes(p, d, n);
    else
        rc = ckpt_pickler_bytes_hole(p, ckpt_pickler_protocol(p) == 2 ? latin1_utf8(d, n, NULL) : n, (void *)d);
    if (rc || (i && (rc = ckpt_pickler_none(p))))
        return rc;
    return ckpt_pickler_tuple(p, i ? 4 : 3);
}

CKPT_TEST(test_pickle_write_holes_land_at_their_offsets)
{
    ckpt_arena *a;
    ckpt_value *root, *t0, *t1, *back_holes, *back_inline;
    ckpt_buf d1 = CKPT_BUF_INIT, d2 = CKPT_BUF_INIT;
    FILE *checks = fopen("checks.txt", "w");
    int proto;

    ASSERT_TRUE(checks != NULL);
    ASSERT_OK(ckpt_arena_new(&a));
    root = ckpt_value_new(a, CKPT_VAL_DICT);
    t0 = ckpt_value_new_tensor(a, 0);
    t1 = ckpt_value_new_tensor(a, 1);
    ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "a", 1), t0);
    ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "b", 1), t1);
    ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "c", 1), t0);
    for (proto = 2; proto <= 4; proto += 2) {
        hole_ctx with_holes = { 0 }, inline_data = { 1 };
        ckpt_pickler *p = NULL;
        uint8_t *holes, *inl;
        size_t len, ilen, i;
        uint64_t prev_end = 0;
        char name[64];

        ASSERT_OK(write_tree(root, proto, tensor_cb, &with_holes, &holes, &len, &p));
        ASSERT_EQ_INT(ckpt_pickler_hole_count(p), 2);
        ASSERT_TRUE(ckpt_pickler_hole_at(p, 2) == NULL);
        ASSERT_EQ_INT(ckpt_pickler_size(p), len);
        for (i = 0; i < 2; i++) {
            const ckpt_pickle_hole *h = ckpt_pickler_hole_at(p, i);
            const uint8_t *d = h->tag;
            ASSERT_TRUE(h->offset > prev_end && h->offset + h->size <= len);
            prev_end = h->offset + h->size;
            if (proto == 2)
                latin1_utf8(d, d == data1 ? sizeof data1 : sizeof data0, holes + h->offset);
            else
                memcpy(holes + h->offset, d, (size_t)h->size);
        }
        /* The bytes just before each hole are its length field. */
        ASSERT_EQ_INT(holes[ckpt_pickler_hole_at(p, 0)->offset - (proto == 2 ? 4 : 1)], 10);
        ckpt_pickler_free(p);
        ASSERT_OK(write_tree(root, proto, tensor_cb, &inline_data, &inl, &ilen, NULL));
        ASSERT_EQ_INT(ilen, len);
        ASSERT_TRUE(memcmp(inl, holes, len) == 0);
        ASSERT_OK(ckpt_pickle_read(&back_holes, NULL, a, holes, len, NULL));
        ASSERT_OK(ckpt_pickle_read(&back_inline, NULL, a, inl, ilen, NULL));
        ASSERT_OK(dump_of(back_holes, &d1));
        ASSERT_OK(dump_of(back_inline, &d2));
        ASSERT_EQ_STR((char *)d1.data, (char *)d2.data);
        ASSERT_TRUE(ckpt_value_dict_get(back_holes, "a") == ckpt_value_dict_get(back_holes, "c"));
        snprintf(name, sizeof name, "holes%d.pkl", proto);
        ckpt_test_write_file(name, holes, len);
        fprintf(checks, "%s\tx == {'a': ('tensor', 0, b'0123456789'), 'b': ('tensor', 1, b'\\x80\\xffx\\x00', None), "
                        "'c': x['a']} and x['a'] is x['c']\n", name);
        free(holes);
        free(inl);
    }
    fclose(checks);
    ASSERT_EQ_INT(python_asserts(), 0);
    ckpt_buf_dispose(&d1);
    ckpt_buf_dispose(&d2);
    ckpt_arena_free(a);
}

/* ---- opcodes and misuse ------------------------------------------------------------ */

static int no_write(uint64_t offset, const void *data, size_t len, void *payload)
{
    (void)offset;
    (void)data;
    (void)len;
    (void)payload;
    return 0;
}

CKPT_TEST(test_pickle_write_primitive_encodings)
{
    static const uint8_t p2[] =
        "\x80\x02" "K\x00" "K\xff" "M\x00\x01" "M\xff\xff" "J\x00\x00\x01\x00" "J\xff\xff\xff\xff"
        "J\xff\xff\xff\x7f" "J\x00\x00\x00\x80" "\x8a\x05\x00\x00\x00\x80\x00"
        "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80" "G\x3f\xf8\x00\x00\x00\x00\x00\x00" "\x88\x89N"
        "X\x02\x00\x00\x00\xc3\xa9" "c__builtin__\nset\nq\x00" "h\x00" "c__builtin__\nxrange\nq\x01"
        "c__builtin__\nbytes\nq\x02)Rq\x03" "c_codecs\nencode\nq\x04X\x03\x00\x00\x00" "a\xc3\xbfq\x05"
        "X\x06\x00\x00\x00latin1q\x06\x86q\x07Rq\x08" "(K\x01K\x02K\x03K\x04t" "(\x85" ".";
    static const uint8_t p4[] =
        "\x80\x04" "\x8c\x08" "builtins\x8c\x03" "set\x93\x94" "h\x00" "\x8c\x08" "builtins\x8c\x05" "range\x93\x94"
        "C\x02" "ab\x94" "\x8c\x01" "a\x8c\x00" ".";
    ckpt_pickler *p;
    uint8_t *out;
    size_t len;

    ASSERT_OK(ckpt_pickler_new(&p, 2, NULL, NULL));
    ASSERT_EQ_INT(ckpt_pickler_protocol(p), 2);
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_OK(ckpt_pickler_int(p, 0));
    ASSERT_OK(ckpt_pickler_int(p, 255));
    ASSERT_OK(ckpt_pickler_int(p, 256));
    ASSERT_OK(ckpt_pickler_int(p, 65535));
    ASSERT_OK(ckpt_pickler_int(p, 65536));
    ASSERT_OK(ckpt_pickler_int(p, -1));
    ASSERT_OK(ckpt_pickler_int(p, INT32_MAX));
    ASSERT_OK(ckpt_pickler_int(p, INT32_MIN));
    ASSERT_OK(ckpt_pickler_int(p, (int64_t)INT32_MAX + 1));
    ASSERT_OK(ckpt_pickler_int(p, INT64_MIN));
    ASSERT_OK(ckpt_pickler_float(p, 1.5));
    ASSERT_OK(ckpt_pickler_bool(p, 1));
    ASSERT_OK(ckpt_pickler_bool(p, 0));
    ASSERT_OK(ckpt_pickler_none(p));
    ASSERT_OK(ckpt_pickler_str(p, "\xc3\xa9", 2));
    ASSERT_OK(ckpt_pickler_global(p, "builtins", "set"));
    ASSERT_OK(ckpt_pickler_global(p, "__builtin__", "set"));
    ASSERT_OK(ckpt_pickler_global(p, "builtins", "range"));
    ASSERT_OK(ckpt_pickler_bytes(p, "", 0));
    ASSERT_OK(ckpt_pickler_bytes(p, "a\xff", 2));
    ASSERT_OK(ckpt_pickler_mark(p));
    ASSERT_OK(ckpt_pickler_int(p, 1));
    ASSERT_OK(ckpt_pickler_int(p, 2));
    ASSERT_OK(ckpt_pickler_int(p, 3));
    ASSERT_OK(ckpt_pickler_int(p, 4));
    ASSERT_OK(ckpt_pickler_tuple(p, 4));
    ASSERT_OK(ckpt_pickler_mark(p));
    ASSERT_OK(ckpt_pickler_op(p, '('));
    ASSERT_OK(ckpt_pickler_tuple(p, 1));
    ASSERT_OK(ckpt_pickler_end(p));
    ASSERT_TRUE((out = stream_of(p, &len)) != NULL);
    ASSERT_EQ_INT(len, sizeof p2 - 1);
    ASSERT_TRUE(memcmp(out, p2, len) == 0);
    free(out);
    ckpt_pickler_free(p);

    ASSERT_OK(ckpt_pickler_new(&p, 4, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_OK(ckpt_pickler_global(p, "__builtin__", "set"));
    ASSERT_OK(ckpt_pickler_global(p, "builtins", "set"));
    ASSERT_OK(ckpt_pickler_global(p, "__builtin__", "xrange"));
    ASSERT_OK(ckpt_pickler_bytes(p, "ab", 2));
    ASSERT_OK(ckpt_pickler_str(p, "a", 1));
    ASSERT_OK(ckpt_pickler_str(p, "", 0));
    ASSERT_OK(ckpt_pickler_end(p));
    ASSERT_TRUE((out = stream_of(p, &len)) != NULL);
    ASSERT_EQ_INT(len, sizeof p4 - 1);
    ASSERT_TRUE(memcmp(out, p4, len) == 0);
    free(out);
    ckpt_pickler_free(p);
}

CKPT_TEST(test_pickle_write_string_forms_by_length)
{
    static char text[300];
    ckpt_pickler *p;
    uint8_t *out;
    size_t len;

    memset(text, 'a', sizeof text);
    ASSERT_OK(ckpt_pickler_new(&p, 4, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_OK(ckpt_pickler_str(p, text, 255));
    ASSERT_OK(ckpt_pickler_str(p, text, 256));
    ASSERT_OK(ckpt_pickler_bytes(p, text, 255));
    ASSERT_OK(ckpt_pickler_bytes(p, text, 256));
    ASSERT_OK(ckpt_pickler_end(p));
    ASSERT_TRUE((out = stream_of(p, &len)) != NULL);
    ASSERT_EQ_INT(out[2], 0x8C);
    ASSERT_EQ_INT(out[3], 255);
    ASSERT_EQ_INT(out[4 + 255], 'X');
    ASSERT_EQ_INT(out[4 + 255 + 2], 1);
    ASSERT_EQ_INT(out[4 + 255 + 5 + 256], 'C');
    ASSERT_EQ_INT(out[4 + 255 + 5 + 256 + 2 + 255 + 1], 'B');
    free(out);
    ckpt_pickler_free(p);
}

CKPT_TEST(test_pickle_write_misuse_is_refused)
{
    ckpt_arena *a;
    ckpt_pickler *p;
    ckpt_value *list;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_new(&p, 3, NULL, NULL));
    ASSERT_OK(ckpt_pickler_new(&p, 2, NULL, NULL));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_none(p));
    ASSERT_ERROR_MENTIONS("not begun");
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_begin(p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_emit(p, no_write, NULL));
    ASSERT_OK(ckpt_pickler_mark(p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_end(p));
    ASSERT_ERROR_MENTIONS("open MARK");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_none(p));
    ASSERT_ERROR_MENTIONS("failed state");
    ckpt_pickler_free(p);

    ASSERT_OK(ckpt_pickler_new(&p, 2, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_tuple(p, 2));
    ckpt_pickler_free(p);

    ASSERT_OK(ckpt_pickler_new(&p, 2, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_str(p, "\xff", 1));
    ckpt_pickler_free(p);

    ASSERT_OK(ckpt_pickler_new(&p, 2, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_global(p, "a\nb", "c"));
    ckpt_pickler_free(p);
    ASSERT_OK(ckpt_pickler_new(&p, 4, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_OK(ckpt_pickler_global(p, "a\nb", "c"));
    ckpt_pickler_free(p);

    ASSERT_OK(ckpt_pickler_new(&p, 4, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_value(p, ckpt_value_new_tensor(a, 0)));
    ASSERT_ERROR_MENTIONS("no tensor callback");
    ckpt_pickler_free(p);

    ASSERT_OK(ckpt_pickler_new(&p, 4, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    list = ckpt_value_new(a, CKPT_VAL_LIST);
    ckpt_value_append(a, list, NULL);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_value(p, list));
    ckpt_pickler_free(p);
    ckpt_pickler_free(NULL);
    ckpt_arena_free(a);
}

/* ---- cycles and depth -------------------------------------------------------------- */

static ckpt_value *list_of(ckpt_arena *a, ckpt_value *item)
{
    ckpt_value *l = ckpt_value_new(a, CKPT_VAL_LIST);
    if (item)
        ckpt_value_append(a, l, item);
    return l;
}

CKPT_TEST(test_pickle_write_cycles_survive)
{
    ckpt_arena *a;
    ckpt_value *self_list, *tuple, *inner, *od, *obj, *args_list, *set, *set_tuple, *roots[5], *back;
    ckpt_buf d1 = CKPT_BUF_INIT, d2 = CKPT_BUF_INIT;
    static const char *const exprs[] = { "x[0] is x", "x[0][0] is x", "x['self'] is x", "True", "True" };
    FILE *checks = fopen("checks.txt", "w");
    int proto, i;

    ASSERT_TRUE(checks != NULL);
    ASSERT_OK(ckpt_arena_new(&a));
    self_list = list_of(a, NULL);
    ckpt_value_append(a, self_list, self_list);
    /* A tuple holding a list holding the tuple. */
    inner = list_of(a, NULL);
    tuple = ckpt_value_new(a, CKPT_VAL_TUPLE);
    ckpt_value_append(a, tuple, inner);
    ckpt_value_append(a, inner, tuple);
    od = ckpt_value_new(a, CKPT_VAL_DICT);
    od->u.dict.cls = ckpt_value_new_global(a, "collections", "OrderedDict");
    ckpt_value_dict_set(a, od, ckpt_value_new_str(a, "self", 4), od);
    /* An object whose arguments and state lead back to it. */
    obj = ckpt_value_new(a, CKPT_VAL_OBJECT);
    obj->u.obj.callable = ckpt_value_new_global(a, "builtins", "list");
    args_list = list_of(a, obj);
    obj->u.obj.args = ckpt_value_new(a, CKPT_VAL_TUPLE);
    ckpt_value_append(a, obj->u.obj.args, args_list);
    obj->u.obj.state = list_of(a, obj);
    /* A set holding a tuple holding the set: fine with EMPTY_SET, impossible as set([...]). */
    set = ckpt_value_new(a, CKPT_VAL_SET);
    set_tuple = ckpt_value_new(a, CKPT_VAL_TUPLE);
    ckpt_value_append(a, set_tuple, set);
    ckpt_value_append(a, set, set_tuple);
    roots[0] = self_list;
    roots[1] = tuple;
    roots[2] = od;
    roots[3] = obj;
    roots[4] = set;
    for (proto = 2; proto <= 4; proto += 2) {
        for (i = 0; i < 5; i++) {
            uint8_t *out;
            size_t len;
            char name[64];

            if (i == 4 && proto == 2) {
                ASSERT_FAILS(CKPT_EINVALID, write_tree(roots[i], proto, NULL, NULL, &out, &len, NULL));
                ASSERT_ERROR_MENTIONS("nested deeper than");
                continue;
            }
            ASSERT_OK(write_tree(roots[i], proto, NULL, NULL, &out, &len, NULL));
            ASSERT_OK(ckpt_pickle_read(&back, NULL, a, out, len, NULL));
            ASSERT_OK(dump_of(roots[i], &d1));
            ASSERT_OK(dump_of(back, &d2));
            ASSERT_EQ_STR((char *)d2.data, (char *)d1.data);
            if (i < 3) {
                snprintf(name, sizeof name, "cycle%d.p%d", i, proto);
                ckpt_test_write_file(name, out, len);
                fprintf(checks, "%s\t%s\n", name, exprs[i]);
            }
            free(out);
        }
    }
    fclose(checks);
    ASSERT_EQ_INT(python_asserts(), 0);
    ckpt_buf_dispose(&d1);
    ckpt_buf_dispose(&d2);
    ckpt_arena_free(a);
}

CKPT_TEST(test_pickle_write_depth_is_bounded)
{
    ckpt_arena *a;
    ckpt_pickler *p;
    ckpt_value *v;
    int i;

    ASSERT_OK(ckpt_arena_new(&a));
    v = ckpt_value_new_int(a, 0);
    for (i = 0; i < 3000; i++)
        v = list_of(a, v);
    ASSERT_OK(ckpt_pickler_new(&p, 4, NULL, NULL));
    ASSERT_OK(ckpt_pickler_begin(p));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_value(p, v));
    ASSERT_ERROR_MENTIONS("nested deeper than 2048");
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickler_end(p));
    ckpt_pickler_free(p);
    ckpt_arena_free(a);
}
