/* Value trees: constructors, Python dict-key semantics, latin-1 bytes, the walk (paths,
 * sharing, cycles, depth) and the one-line repr. */
#include "test.h"

#include <ckpt/value.h>

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

static ckpt_value *str(ckpt_arena *a, const char *s)
{
    return ckpt_value_new_str(a, s, strlen(s));
}

static ckpt_value *bytes(ckpt_arena *a, const char *p, size_t n, uint32_t flags, size_t decoded)
{
    ckpt_value *v = ckpt_value_new(a, CKPT_VAL_BYTES);
    v->flags = flags;
    v->u.bytes.ptr = (const uint8_t *)p;
    v->u.bytes.len = n;
    v->u.bytes.decoded_len = decoded;
    return v;
}

static ckpt_value *seq(ckpt_arena *a, ckpt_value_kind kind, int n, ...)
{
    ckpt_value *v = ckpt_value_new(a, kind);
    va_list ap;
    int i;

    va_start(ap, n);
    for (i = 0; i < n; i++)
        ckpt_value_append(a, v, va_arg(ap, ckpt_value *));
    va_end(ap);
    return v;
}

CKPT_TEST(test_value_constructors_copy_their_text)
{
    ckpt_arena *a;
    char text[] = "abc\0def";
    char mod[] = "collections", name[] = "OrderedDict";
    ckpt_value *v;

    ASSERT_OK(ckpt_arena_new(&a));
    v = ckpt_value_new_str(a, text, 7);
    text[0] = 'X';
    ASSERT_EQ_INT(v->kind, CKPT_VAL_STR);
    ASSERT_EQ_INT(v->u.str.len, 7);
    ASSERT_TRUE(memcmp(v->u.str.ptr, "abc\0def", 8) == 0);
    v = ckpt_value_new_global(a, mod, name);
    mod[0] = name[0] = 'X';
    ASSERT_TRUE(ckpt_value_is_global(v, "collections", "OrderedDict"));
    ASSERT_EQ_INT(ckpt_value_new_int(a, -7)->u.integer, -7);
    ASSERT_TRUE(ckpt_value_new_float(a, 2.5)->u.real == 2.5);
    ASSERT_EQ_INT(ckpt_value_new_bool(a, 5)->u.boolean, 1);
    ASSERT_EQ_INT(ckpt_value_new_tensor(a, 9)->u.tensor.index, 9);
    ASSERT_EQ_INT(ckpt_value_new(a, CKPT_VAL_NONE)->kind, CKPT_VAL_NONE);
    ckpt_arena_free(a);
}

CKPT_TEST(test_value_append_to_sequences_and_objects)
{
    ckpt_arena *a;
    ckpt_value *list, *obj, *one;
    int i;

    ASSERT_OK(ckpt_arena_new(&a));
    one = ckpt_value_new_int(a, 1);
    list = ckpt_value_new(a, CKPT_VAL_LIST);
    for (i = 0; i < 1000; i++)
        ASSERT_OK(ckpt_value_append(a, list, ckpt_value_new_int(a, i)));
    ASSERT_EQ_INT(list->u.seq.n, 1000);
    ASSERT_EQ_INT(list->u.seq.items[999]->u.integer, 999);
    obj = ckpt_value_new(a, CKPT_VAL_OBJECT);
    ASSERT_OK(ckpt_value_append(a, obj, one));
    ASSERT_EQ_INT(obj->u.obj.list_items.n, 1);
    ASSERT_OK(ckpt_value_append(a, ckpt_value_new(a, CKPT_VAL_FROZENSET), one));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_value_append(a, ckpt_value_new(a, CKPT_VAL_DICT), one));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_value_append(a, one, one));
    ckpt_arena_free(a);
}

CKPT_TEST(test_value_dict_keys_follow_python_equality)
{
    ckpt_arena *a;
    ckpt_value *d, *k1, *tuple_key, *nan1, *nan2, *obj;

    ASSERT_OK(ckpt_arena_new(&a));
    d = ckpt_value_new(a, CKPT_VAL_DICT);
    k1 = str(a, "a");
    ASSERT_OK(ckpt_value_dict_set(a, d, k1, ckpt_value_new_int(a, 1)));
    ASSERT_OK(ckpt_value_dict_set(a, d, str(a, "b"), ckpt_value_new_int(a, 2)));
    ASSERT_OK(ckpt_value_dict_set(a, d, str(a, "a"), ckpt_value_new_int(a, 3)));
    ASSERT_EQ_INT(d->u.dict.map.n, 2);
    ASSERT_TRUE(d->u.dict.map.keys[0] == k1);
    ASSERT_EQ_INT(ckpt_value_dict_get(d, "a")->u.integer, 3);
    /* 1 == True == 1.0, 0 == False == -0.0, None == None. */
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_int(a, 1), str(a, "int")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_bool(a, 1), str(a, "bool")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_float(a, 1.0), str(a, "float")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_float(a, -0.0), str(a, "zero")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_bool(a, 0), str(a, "false")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_float(a, 1.5), str(a, "x")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new(a, CKPT_VAL_NONE), str(a, "n1")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new(a, CKPT_VAL_NONE), str(a, "n2")));
    ASSERT_EQ_INT(d->u.dict.map.n, 6);
    ASSERT_TRUE(ckpt_value_is_str(d->u.dict.map.vals[2], "float"));
    ASSERT_EQ_INT(d->u.dict.map.keys[3]->kind, CKPT_VAL_FLOAT);
    ASSERT_TRUE(ckpt_value_is_str(d->u.dict.map.vals[3], "false"));
    ASSERT_TRUE(ckpt_value_is_str(d->u.dict.map.vals[5], "n2"));
    /* bytes compare by decoded content; str and bytes never match. */
    ASSERT_OK(ckpt_value_dict_set(a, d, bytes(a, "\xc3\xbf" "a", 3, CKPT_BYTES_LATIN1_UTF8, 2), str(a, "b1")));
    ASSERT_OK(ckpt_value_dict_set(a, d, bytes(a, "\xff" "a", 2, 0, 0), str(a, "b2")));
    ASSERT_OK(ckpt_value_dict_set(a, d, bytes(a, "b", 1, 0, 0), str(a, "b3")));
    ASSERT_EQ_INT(d->u.dict.map.n, 8);
    ASSERT_TRUE(ckpt_value_is_str(d->u.dict.map.vals[6], "b2"));
    /* Tuples match only themselves; NaN matches only the same node. */
    tuple_key = seq(a, CKPT_VAL_TUPLE, 1, ckpt_value_new_int(a, 1));
    ASSERT_OK(ckpt_value_dict_set(a, d, tuple_key, str(a, "t1")));
    ASSERT_OK(ckpt_value_dict_set(a, d, seq(a, CKPT_VAL_TUPLE, 1, ckpt_value_new_int(a, 1)), str(a, "t2")));
    ASSERT_OK(ckpt_value_dict_set(a, d, tuple_key, str(a, "t3")));
    nan1 = ckpt_value_new_float(a, NAN);
    nan2 = ckpt_value_new_float(a, NAN);
    ASSERT_OK(ckpt_value_dict_set(a, d, nan1, str(a, "nan1")));
    ASSERT_OK(ckpt_value_dict_set(a, d, nan2, str(a, "nan2")));
    ASSERT_OK(ckpt_value_dict_set(a, d, nan1, str(a, "nan3")));
    ASSERT_EQ_INT(d->u.dict.map.n, 12);
    ASSERT_TRUE(ckpt_value_is_str(d->u.dict.map.vals[8], "t3"));
    ASSERT_TRUE(ckpt_value_is_str(d->u.dict.map.vals[10], "nan3"));
    ASSERT_TRUE(ckpt_value_dict_get(d, "zzz") == NULL);
    ASSERT_TRUE(ckpt_value_dict_get(tuple_key, "a") == NULL);

    /* Loading a global twice gives the same class, so it is the same key. */
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_global(a, "__builtin__", "set"), str(a, "g1")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_global(a, "builtins", "set"), str(a, "g2")));
    ASSERT_OK(ckpt_value_dict_set(a, d, ckpt_value_new_global(a, "builtins", "sets"), str(a, "g3")));
    ASSERT_EQ_INT(d->u.dict.map.n, 14);
    ASSERT_TRUE(ckpt_value_is_str(d->u.dict.map.vals[12], "g2"));

    obj = ckpt_value_new(a, CKPT_VAL_OBJECT);
    ASSERT_OK(ckpt_value_dict_set(a, obj, str(a, "k"), str(a, "v")));
    ASSERT_EQ_INT(obj->u.obj.dict_items.n, 1);
    ASSERT_FAILS(CKPT_EINVALID, ckpt_value_dict_set(a, tuple_key, k1, k1));
    ckpt_arena_free(a);
}

CKPT_TEST(test_value_large_dict_is_linear)
{
    ckpt_arena *a;
    ckpt_value *d, *hand;
    char key[32];
    int i, n = 200000;
    clock_t start = clock();

    ASSERT_OK(ckpt_arena_new(&a));
    d = ckpt_value_new(a, CKPT_VAL_DICT);
    for (i = 0; i < n; i++) {
        snprintf(key, sizeof key, "layers.%d.weight", i);
        ASSERT_OK(ckpt_value_dict_set(a, d, str(a, key), ckpt_value_new_int(a, i)));
    }
    for (i = 0; i < n; i += 7) {
        snprintf(key, sizeof key, "layers.%d.weight", i);
        ASSERT_OK(ckpt_value_dict_set(a, d, str(a, key), ckpt_value_new_int(a, -i)));
    }
    ASSERT_EQ_INT(d->u.dict.map.n, n);
    for (i = 0; i < n; i++) {
        snprintf(key, sizeof key, "layers.%d.weight", i);
        ASSERT_EQ_INT(ckpt_value_dict_get(d, key)->u.integer, i % 7 ? i : -i);
    }
    ASSERT_TRUE((double)(clock() - start) / CLOCKS_PER_SEC < 20.0);

    /* Entries filled by hand are found too, indexed or not. */
    hand = ckpt_value_new(a, CKPT_VAL_DICT);
    hand->u.dict.map.keys = ckpt_arena_alloc(a, 64 * sizeof(ckpt_value *));
    hand->u.dict.map.vals = ckpt_arena_alloc(a, 64 * sizeof(ckpt_value *));
    hand->u.dict.map.cap = 64;
    for (i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "k%d", i);
        hand->u.dict.map.keys[i] = str(a, key);
        hand->u.dict.map.vals[i] = ckpt_value_new_int(a, i);
    }
    hand->u.dict.map.n = 20;
    ASSERT_EQ_INT(ckpt_value_dict_get(hand, "k13")->u.integer, 13);
    ASSERT_OK(ckpt_value_dict_set(a, hand, str(a, "k13"), ckpt_value_new_int(a, 99)));
    ASSERT_EQ_INT(hand->u.dict.map.n, 20);
    hand->u.dict.map.keys[20] = str(a, "late");
    hand->u.dict.map.vals[20] = ckpt_value_new_int(a, 20);
    hand->u.dict.map.n = 21;
    ASSERT_EQ_INT(ckpt_value_dict_get(hand, "late")->u.integer, 20);
    ASSERT_OK(ckpt_value_dict_set(a, hand, str(a, "late"), ckpt_value_new_int(a, 21)));
    ASSERT_EQ_INT(hand->u.dict.map.n, 21);
    ASSERT_EQ_INT(ckpt_value_dict_get(hand, "late")->u.integer, 21);
    ASSERT_EQ_INT(ckpt_value_dict_get(hand, "k13")->u.integer, 99);
    ckpt_arena_free(a);
}

CKPT_TEST(test_value_predicates)
{
    ckpt_arena *a;
    ckpt_value *g;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_TRUE(ckpt_value_is_str(str(a, "x"), "x"));
    ASSERT_TRUE(!ckpt_value_is_str(str(a, "x"), "xy"));
    ASSERT_TRUE(!ckpt_value_is_str(ckpt_value_new_int(a, 1), "1"));
    ASSERT_TRUE(!ckpt_value_is_str(NULL, "1"));
    g = ckpt_value_new_global(a, "__builtin__", "set");
    ASSERT_TRUE(ckpt_value_is_global(g, "builtins", "set"));
    ASSERT_TRUE(ckpt_value_is_global(g, "__builtin__", "set"));
    ASSERT_TRUE(!ckpt_value_is_global(g, "builtins", "frozenset"));
    ASSERT_TRUE(ckpt_value_is_global(ckpt_value_new_global(a, "copyreg", "_reconstructor"), "copy_reg",
                                     "_reconstructor"));
    ASSERT_TRUE(!ckpt_value_is_global(str(a, "set"), "builtins", "set"));
    ckpt_arena_free(a);
}

CKPT_TEST(test_value_latin1_bytes_decode)
{
    ckpt_arena *a;
    ckpt_value *v, *raw, *bad;
    unsigned char out[8];

    ASSERT_OK(ckpt_arena_new(&a));
    /* "a\xe9b\xff" stored as UTF-8 text of latin-1 code points. */
    v = bytes(a, "a\xc3\xa9" "b\xc3\xbf", 6, CKPT_BYTES_LATIN1_UTF8, 4);
    ASSERT_EQ_INT(ckpt_value_bytes_size(v), 4);
    ASSERT_OK(ckpt_value_bytes_decode(v, 0, 4, out));
    ASSERT_TRUE(memcmp(out, "a\xe9" "b\xff", 4) == 0);
    ASSERT_OK(ckpt_value_bytes_decode(v, 1, 2, out));
    ASSERT_TRUE(memcmp(out, "\xe9" "b", 2) == 0);
    ASSERT_OK(ckpt_value_bytes_decode(v, 4, 0, out));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_value_bytes_decode(v, 3, 2, out));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_value_bytes_decode(v, 5, 0, out));
    raw = bytes(a, "xyz", 3, 0, 0);
    ASSERT_EQ_INT(ckpt_value_bytes_size(raw), 3);
    ASSERT_OK(ckpt_value_bytes_decode(raw, 1, 2, out));
    ASSERT_TRUE(memcmp(out, "yz", 2) == 0);
    bad = bytes(a, "a\xe2\x82\xac", 4, CKPT_BYTES_LATIN1_UTF8, 2);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_value_bytes_decode(bad, 0, 2, out));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_value_bytes_decode(str(a, "s"), 0, 1, out));
    ASSERT_EQ_INT(ckpt_value_bytes_size(str(a, "s")), 0);
    ckpt_arena_free(a);
}

/* Every window of texts mixing ASCII runs (decoded eight at a time) and 2-byte forms. */
CKPT_TEST(test_value_latin1_windows)
{
    uint8_t raw[100], text[200], out[100];
    unsigned seed = 7;
    size_t n, len, i, off, k;
    ckpt_arena *a;
    ckpt_value *v;

    ASSERT_OK(ckpt_arena_new(&a));
    for (n = 0; n < 100; n += 3) {
        for (i = 0, len = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            raw[i] = (uint8_t)((seed >> 12) % 4 == 0 ? 0x80 + (seed >> 20) % 128 : 'a' + (seed >> 20) % 26);
            if (raw[i] < 0x80) {
                text[len++] = raw[i];
            } else {
                text[len++] = (uint8_t)(0xC0 | (raw[i] >> 6));
                text[len++] = (uint8_t)(0x80 | (raw[i] & 0x3F));
            }
        }
        v = bytes(a, (const char *)text, len, CKPT_BYTES_LATIN1_UTF8, n);
        for (off = 0; off <= n; off++) {
            for (k = 0; off + k <= n; k += 1 + k / 3) {
                memset(out, 0xEE, sizeof out);
                ASSERT_OK(ckpt_value_bytes_decode(v, off, k, out));
                ASSERT_TRUE(k == 0 || memcmp(out, raw + off, k) == 0);
                ASSERT_TRUE(k == sizeof out || out[k] == 0xEE);
            }
        }
    }
    ckpt_arena_free(a);
}

typedef struct visits {
    char paths[64][64];
    const ckpt_value *nodes[64];
    int n, stop_at;
} visits;

static int record(const ckpt_value *v, const char *path, void *payload)
{
    visits *vs = payload;
    if (vs->n < 64) {
        snprintf(vs->paths[vs->n], sizeof vs->paths[0], "%s", path);
        vs->nodes[vs->n] = v;
    }
    vs->n++;
    return vs->stop_at && vs->n == vs->stop_at ? 42 : 0;
}

CKPT_TEST(test_value_walk_paths_in_order)
{
    static const char *const expected[] = {
        "", "(key 0)", "model", "model/0", "model/1", "(key 1)", "(key 2)", "(key 2)/0", "(key 2)/1",
        "(1, 2)", "(key 3)", "obj", "obj/(callable)", "obj/(args)", "obj/(args)/0", "obj/0", "obj/(key 0)",
        "obj/k", "obj/(state)", "obj/(state)/(key 0)", "obj/(state)/s", "obj/(state)/s/(pid)", "obj/(state)/s/(pid)/0",
    };
    ckpt_arena *a;
    ckpt_value *root, *tup, *obj, *state, *pid, *one;
    visits vs;
    size_t i;

    ASSERT_OK(ckpt_arena_new(&a));
    root = ckpt_value_new(a, CKPT_VAL_DICT);
    one = ckpt_value_new_int(a, 1);
    ckpt_value_dict_set(a, root, str(a, "model"), seq(a, CKPT_VAL_LIST, 2, ckpt_value_new_tensor(a, 0), one));
    ckpt_value_dict_set(a, root, ckpt_value_new_int(a, 7), one);
    tup = seq(a, CKPT_VAL_TUPLE, 2, ckpt_value_new_int(a, 1), ckpt_value_new_int(a, 2));
    ckpt_value_dict_set(a, root, tup, ckpt_value_new(a, CKPT_VAL_NONE));
    obj = ckpt_value_new(a, CKPT_VAL_OBJECT);
    obj->u.obj.callable = ckpt_value_new_global(a, "argparse", "Namespace");
    obj->u.obj.args = seq(a, CKPT_VAL_TUPLE, 1, str(a, "arg"));
    ckpt_value_append(a, obj, ckpt_value_new_float(a, 1.5));
    ckpt_value_dict_set(a, obj, str(a, "k"), str(a, "v"));
    state = ckpt_value_new(a, CKPT_VAL_DICT);
    pid = ckpt_value_new(a, CKPT_VAL_PERSID);
    pid->u.persid.pid = seq(a, CKPT_VAL_TUPLE, 1, str(a, "storage"));
    ckpt_value_dict_set(a, state, str(a, "s"), pid);
    obj->u.obj.state = state;
    ckpt_value_dict_set(a, root, str(a, "obj"), obj);

    memset(&vs, 0, sizeof vs);
    ASSERT_OK(ckpt_value_walk(root, 16, record, &vs));
    ASSERT_EQ_INT(vs.n, (int)(sizeof expected / sizeof expected[0]));
    for (i = 0; i < sizeof expected / sizeof expected[0]; i++)
        ASSERT_EQ_STR(vs.paths[i], expected[i]);
    /* The shared int 1 is visited once, at its first place. */
    ASSERT_TRUE(vs.nodes[4] == one);
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_value_walk(root, 3, record, &vs));
    ASSERT_ERROR_MENTIONS("nested deeper than 3 levels at 'obj/(state)/s/(pid)'");
    memset(&vs, 0, sizeof vs);
    vs.stop_at = 3;
    ASSERT_EQ_INT(ckpt_value_walk(root, 16, record, &vs), 42);
    ASSERT_EQ_INT(vs.n, 3);
    ASSERT_OK(ckpt_value_walk(NULL, 16, record, &vs));
    ckpt_arena_free(a);
}

static int count(const ckpt_value *v, const char *path, void *payload)
{
    (void)v;
    (void)path;
    (*(size_t *)payload)++;
    return 0;
}

CKPT_TEST(test_value_walk_shared_and_cyclic_trees)
{
    ckpt_arena *a;
    ckpt_value *x, *cyc, *d;
    size_t n = 0;
    int i;

    ASSERT_OK(ckpt_arena_new(&a));
    /* 2^80 paths, 81 nodes. */
    x = ckpt_value_new_int(a, 0);
    for (i = 0; i < 80; i++)
        x = seq(a, CKPT_VAL_LIST, 2, x, x);
    ASSERT_OK(ckpt_value_walk(x, 100, count, &n));
    ASSERT_EQ_INT(n, 81);
    /* A list holding itself and a dict holding itself. */
    cyc = ckpt_value_new(a, CKPT_VAL_LIST);
    ckpt_value_append(a, cyc, cyc);
    d = ckpt_value_new(a, CKPT_VAL_DICT);
    ckpt_value_dict_set(a, d, str(a, "self"), d);
    ckpt_value_append(a, cyc, d);
    n = 0;
    ASSERT_OK(ckpt_value_walk(cyc, 3, count, &n));
    ASSERT_EQ_INT(n, 3);
    ckpt_arena_free(a);
}

static void check_repr(const ckpt_value *v, size_t cap, const char *expected, int *ok)
{
    char buf[512];
    size_t n = ckpt_value_repr(v, buf, cap);
    if (strcmp(buf, expected) != 0 || n != strlen(buf)) {
        fprintf(stderr, "  repr \"%s\" (%zu), expected \"%s\"\n", buf, n, expected);
        *ok = 0;
    }
}

static ckpt_value *global_object(ckpt_arena *a, const char *m, const char *n, ckpt_value *args)
{
    ckpt_value *o = ckpt_value_new(a, CKPT_VAL_OBJECT);
    o->u.obj.callable = ckpt_value_new_global(a, m, n);
    o->u.obj.args = args;
    return o;
}

CKPT_TEST(test_value_repr_is_short_and_python_like)
{
    static const struct { double d; const char *text; } floats[] = {
        { 1.0, "1.0" }, { 0.1, "0.1" }, { -0.0, "-0.0" }, { 2.5, "2.5" }, { 1e16, "1e+16" },
        { 1e15, "1000000000000000.0" }, { 123456789.0, "123456789.0" }, { 0.0001, "0.0001" },
        { 1e-05, "1e-05" }, { 5e-324, "5e-324" }, { 1.7976931348623157e308, "1.7976931348623157e+308" },
        { 1.5e300, "1.5e+300" }, { 123.456, "123.456" },
    };
    static const uint8_t two64[] = { 0, 0, 0, 0, 0, 0, 0, 0, 1 };
    static const uint8_t minus2e100[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xF0 };
    ckpt_arena *a;
    ckpt_value *od, *ns, *big, *v, *list, *nested;
    char buf[96];
    int ok = 1, i;

    ASSERT_OK(ckpt_arena_new(&a));
    od = ckpt_value_new(a, CKPT_VAL_DICT);
    od->u.dict.cls = ckpt_value_new_global(a, "collections", "OrderedDict");
    for (i = 0; i < 3; i++)
        ckpt_value_dict_set(a, od, ckpt_value_new_int(a, i), ckpt_value_new_int(a, i));
    check_repr(od, 512, "OrderedDict(3 items)", &ok);
    ns = global_object(a, "argparse", "Namespace", ckpt_value_new(a, CKPT_VAL_TUPLE));
    ns->u.obj.how = CKPT_OBJ_NEWOBJ;
    ns->u.obj.state = ckpt_value_new(a, CKPT_VAL_DICT);
    check_repr(ns, 512, "argparse.Namespace()", &ok);
    ckpt_value_dict_set(a, ns->u.obj.state, str(a, "lr"), ckpt_value_new_float(a, 0.5));
    ckpt_value_dict_set(a, ns->u.obj.state, str(a, "name"), str(a, "x"));
    check_repr(ns, 512, "argparse.Namespace(lr=0.5, name='x')", &ok);
    check_repr(global_object(a, "torch", "device", seq(a, CKPT_VAL_TUPLE, 2, str(a, "cuda"), ckpt_value_new_int(a, 0))),
               512, "torch.device('cuda', 0)", &ok);
    check_repr(ckpt_value_new_tensor(a, 3), 512, "<tensor #3>", &ok);
    big = bytes(a, "0123456789012345678901234567890123456789", 40, 0, 0);
    check_repr(big, 512, "b'012345678901234567890123...'(40 bytes)", &ok);
    check_repr(bytes(a, "a'\\\n\x01\xff", 6, CKPT_BYTES_BYTEARRAY, 0), 512, "bytearray(b'a\\'\\\\\\n\\x01\\xff')", &ok);
    check_repr(str(a, "it's \xc3\xa9\t"), 512, "'it\\'s \xc3\xa9\\t'", &ok);
    memset(buf, 'x', 80);
    buf[80] = 0;
    memcpy(buf + 47, "\xc3\xa9", 2);
    check_repr(str(a, buf), 512, "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'(79 chars)", &ok);
    for (i = 0; i < (int)(sizeof floats / sizeof floats[0]); i++)
        check_repr(ckpt_value_new_float(a, floats[i].d), 512, floats[i].text, &ok);
    check_repr(ckpt_value_new_float(a, NAN), 512, "nan", &ok);
    check_repr(ckpt_value_new_float(a, -INFINITY), 512, "-inf", &ok);
    v = ckpt_value_new(a, CKPT_VAL_BIGINT);
    v->u.bigint.data = two64;
    v->u.bigint.len = sizeof two64;
    check_repr(v, 512, "18446744073709551616", &ok);
    v = ckpt_value_new(a, CKPT_VAL_BIGINT);
    v->u.bigint.data = minus2e100;
    v->u.bigint.len = sizeof minus2e100;
    check_repr(v, 512, "-1267650600228229401496703205376", &ok);
    check_repr(seq(a, CKPT_VAL_TUPLE, 1, ckpt_value_new(a, CKPT_VAL_NONE)), 512, "(None,)", &ok);
    check_repr(ckpt_value_new(a, CKPT_VAL_SET), 512, "set()", &ok);
    check_repr(seq(a, CKPT_VAL_FROZENSET, 2, ckpt_value_new_bool(a, 1), ckpt_value_new_bool(a, 0)), 512,
               "frozenset({True, False})", &ok);
    list = ckpt_value_new(a, CKPT_VAL_LIST);
    for (i = 0; i < 10; i++)
        ckpt_value_append(a, list, ckpt_value_new_int(a, i));
    check_repr(list, 512, "[0, 1, 2, 3, 4, 5, 6, 7, ...]", &ok);
    nested = list;
    for (i = 0; i < 6; i++)
        nested = seq(a, CKPT_VAL_LIST, 1, nested);
    check_repr(nested, 512, "[[[[[...]]]]]", &ok);
    v = ckpt_value_new(a, CKPT_VAL_PERSID);
    v->u.persid.pid = seq(a, CKPT_VAL_TUPLE, 2, str(a, "storage"), ckpt_value_new_global(a, "torch", "FloatStorage"));
    check_repr(v, 512, "persid(('storage', torch.FloatStorage))", &ok);
    /* The cap cuts with "...", never inside a UTF-8 sequence. */
    check_repr(list, 12, "[0, 1, 2...", &ok);
    check_repr(str(a, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"), 9, "'\xc3\xa9\xc3\xa9...", &ok);
    check_repr(list, 3, "..", &ok);
    check_repr(list, 1, "", &ok);
    ASSERT_EQ_INT(ckpt_value_repr(list, buf, 0), 0);
    ASSERT_TRUE(ok);
    /* Cycles render within the limits. */
    v = ckpt_value_new(a, CKPT_VAL_LIST);
    ckpt_value_append(a, v, v);
    check_repr(v, 512, "[[[[[...]]]]]", &ok);
    v = ckpt_value_new(a, CKPT_VAL_OBJECT);
    v->u.obj.callable = v;
    check_repr(v, 512, "...(...)(...)(...)(...)(...)()()()()", &ok);
    ASSERT_TRUE(ok);
    ckpt_arena_free(a);
}

static int shift_index(const ckpt_value *leaf, size_t *index, void *payload)
{
    *index = leaf->u.tensor.index + *(const size_t *)payload;
    return 0;
}

CKPT_TEST(test_value_clone_keeps_sharing_and_cycles)
{
    ckpt_arena *a, *b;
    ckpt_value *root, *shared, *cyclic, *copy, *c_shared1, *c_shared2, *c_cyclic;
    size_t shift = 100;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_arena_new(&b));
    root = ckpt_value_new(a, CKPT_VAL_DICT);
    shared = ckpt_value_new(a, CKPT_VAL_TUPLE);
    cyclic = ckpt_value_new(a, CKPT_VAL_LIST);
    ASSERT_OK(ckpt_value_append(a, shared, ckpt_value_new_tensor(a, 3)));
    ASSERT_OK(ckpt_value_append(a, cyclic, cyclic));
    ASSERT_OK(ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "x", 1), shared));
    ASSERT_OK(ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "y", 1), shared));
    ASSERT_OK(ckpt_value_dict_set(a, root, ckpt_value_new_str(a, "z", 1), cyclic));

    ASSERT_OK(ckpt_value_clone(b, root, shift_index, &shift, &copy));
    ASSERT_TRUE(copy != root);
    c_shared1 = ckpt_value_dict_get(copy, "x");
    c_shared2 = ckpt_value_dict_get(copy, "y");
    c_cyclic = ckpt_value_dict_get(copy, "z");
    ASSERT_TRUE(c_shared1 == c_shared2 && c_shared1 != shared);
    ASSERT_EQ_INT(c_shared1->u.seq.items[0]->u.tensor.index, 103);
    ASSERT_EQ_INT(shared->u.seq.items[0]->u.tensor.index, 3);
    ASSERT_TRUE(c_cyclic != cyclic && c_cyclic->u.seq.items[0] == c_cyclic);
    /* the copy is a dict of its own: adding to it leaves the source alone */
    ASSERT_OK(ckpt_value_dict_set(b, copy, ckpt_value_new_str(b, "w", 1), ckpt_value_new_int(b, 1)));
    ASSERT_EQ_INT(copy->u.dict.map.n, 4);
    ASSERT_EQ_INT(root->u.dict.map.n, 3);
    ASSERT_TRUE(ckpt_value_dict_get(copy, "x") == c_shared1);

    /* without a tensor function indices are kept */
    ASSERT_OK(ckpt_value_clone(b, shared, NULL, NULL, &copy));
    ASSERT_EQ_INT(copy->u.seq.items[0]->u.tensor.index, 3);
    ckpt_arena_free(a);
    ckpt_arena_free(b);
}
