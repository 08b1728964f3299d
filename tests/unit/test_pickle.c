/* The safe pickle reader: every fixture written by CPython (protocols 0-5) gives the tree
 * that testdata/gen/gen_pickles.py derived from the Python objects, unsafe globals are
 * flagged, and hostile or truncated input fails cleanly and fast. */
#include "test.h"
#include "value_dump.h"

#include <ckpt/sys/common.h>
#include <ckpt/sys/pickle.h>

#include <stdlib.h>
#include <time.h>

typedef struct loaded {
    unsigned char *data;
    size_t len;
    ckpt_arena *arena;
    ckpt_value *root;
    size_t end;
} loaded;

static int load(loaded *l, const char *relative)
{
    ckpt_pickle_read_options o = CKPT_PICKLE_READ_OPTIONS_INIT;

    memset(l, 0, sizeof *l);
    l->data = ckpt_test_read_file(ckpt_test_data(relative), &l->len);
    if (!l->data)
        return ckpt_error_set(CKPT_ENOTFOUND, "%s: missing fixture", relative);
    if (ckpt_arena_new(&l->arena) != 0)
        return CKPT_ENOMEM;
    o.source = relative;
    return ckpt_pickle_read(&l->root, &l->end, l->arena, l->data, l->len, &o);
}

static void unload(loaded *l)
{
    ckpt_arena_free(l->arena);
    free(l->data);
}

static int read_mem(ckpt_arena *a, const void *data, size_t len, ckpt_value **out)
{
    ckpt_pickle_read_options o = CKPT_PICKLE_READ_OPTIONS_INIT;
    o.source = "mem.pkl";
    return ckpt_pickle_read(out, NULL, a, data, len, &o);
}

/* The unsafe globals of a tree as sorted, unique "module:name" words (py3 spellings). */
typedef struct unsafe_list {
    char names[16][128];
    int n;
} unsafe_list;

static int collect_unsafe(const ckpt_value *v, const char *path, void *payload)
{
    unsafe_list *u = payload;
    ckpt_buf b = CKPT_BUF_INIT;
    int i;

    (void)path;
    if (v->kind != CKPT_VAL_GLOBAL || !(v->flags & CKPT_VALUE_UNSAFE))
        return 0;
    dump_global(&b, v->u.global.module, v->u.global.name);
    for (i = 0; i < u->n && strcmp(u->names[i], (char *)b.data + 1) != 0; i++)
        ;
    if (i == u->n && u->n < 16)
        snprintf(u->names[u->n++], sizeof u->names[0], "%s", (char *)b.data + 1);
    ckpt_buf_dispose(&b);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void unsafe_text(const ckpt_value *root, char *out, size_t cap)
{
    unsafe_list u;
    int i;

    memset(&u, 0, sizeof u);
    ckpt_value_walk(root, 1000, collect_unsafe, &u);
    qsort(u.names, (size_t)u.n, sizeof u.names[0], cmp_names);
    snprintf(out, cap, "%s", u.n ? "" : "-");
    for (i = 0; i < u.n; i++) {
        strncat(out, u.names[i], cap - strlen(out) - 2);
        if (i + 1 < u.n)
            strcat(out, " ");
    }
}

/* Calls fn for each line of a tab-separated expectations file: up to 3 fields. */
typedef void (*line_fn)(char **fields, int *failures);

static int for_each_line(const char *relative, line_fn fn, int *count)
{
    size_t len;
    char *text = (char *)ckpt_test_read_file(ckpt_test_data(relative), &len), *line, *next;
    int failures = 0;

    if (!text)
        return -1;
    text[len] = '\0';
    *count = 0;
    for (line = text; *line; line = next) {
        char *fields[3] = { NULL, NULL, NULL }, *tab;
        int k;
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        fields[0] = line;
        for (k = 1; k < 3 && (tab = strchr(fields[k - 1], '\t')) != NULL; k++) {
            *tab = '\0';
            fields[k] = tab + 1;
        }
        if (!fields[2])
            return -1;
        fn(fields, &failures);
        (*count)++;
    }
    free(text);
    return failures;
}

static void check_fixture(char **f, int *failures)
{
    char path[256], unsafe[512];
    ckpt_buf dump = CKPT_BUF_INIT;
    loaded l;

    snprintf(path, sizeof path, "pickle/%s", f[0]);
    if (load(&l, path) != 0) {
        fprintf(stderr, "  %s: %s\n", f[0], ckpt_error_last()->message);
        (*failures)++;
    } else if (l.end != l.len || ckpt_test_dump(l.root, 0, &dump) != 0 || strcmp((char *)dump.data, f[2]) != 0) {
        fprintf(stderr, "  %s: end %zu of %zu\n    got      %.600s\n    expected %.600s\n", f[0], l.end, l.len,
                dump.data ? (char *)dump.data : "", f[2]);
        (*failures)++;
    } else {
        unsafe_text(l.root, unsafe, sizeof unsafe);
        if (strcmp(unsafe, f[1]) != 0) {
            fprintf(stderr, "  %s: unsafe globals \"%s\", expected \"%s\"\n", f[0], unsafe, f[1]);
            (*failures)++;
        }
    }
    ckpt_buf_dispose(&dump);
    unload(&l);
}

CKPT_TEST(test_pickle_fixtures_match_python)
{
    int n = 0;
    ASSERT_EQ_INT(for_each_line("pickle/expected.txt", check_fixture, &n), 0);
    ASSERT_TRUE(n >= 60);
}

static void check_hostile(char **f, int *failures)
{
    char path[256];
    loaded l;
    int rc, code = strcmp(f[1], "EUNSUPPORTED") == 0 ? CKPT_EUNSUPPORTED : CKPT_EFORMAT;

    snprintf(path, sizeof path, "pickle/hostile/%s", f[0]);
    rc = load(&l, path);
    if (rc != code || !strstr(ckpt_error_last()->message, f[2]) || !strstr(ckpt_error_last()->message, path) ||
        l.root) {
        fprintf(stderr, "  %s: returned %d \"%s\", expected %s mentioning \"%s\"\n", f[0], rc,
                ckpt_error_last()->message, f[1], f[2]);
        (*failures)++;
    }
    unload(&l);
}

CKPT_TEST(test_pickle_hostile_inputs_fail_cleanly)
{
    int n = 0;
    ASSERT_EQ_INT(for_each_line("pickle/hostile/expected.txt", check_hostile, &n), 0);
    ASSERT_TRUE(n >= 40);
}

CKPT_TEST(test_pickle_every_truncation_fails)
{
    static const char *const files[] = { "containers.p0.pkl", "containers.p2.pkl", "strings.p0.pkl",
                                         "numpy.p2.pkl", "numpy.p4.pkl", "ordered_dict.p2.pkl",
                                         "bytes.p5.pkl", "collections.p4.pkl", "recursive.p1.pkl",
                                         "namespace.p3.pkl" };
    size_t i, cut;

    for (i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[128];
        loaded l;
        ckpt_value *v;
        ckpt_arena *a;

        snprintf(path, sizeof path, "pickle/%s", files[i]);
        ASSERT_OK(load(&l, path));
        ASSERT_OK(ckpt_arena_new(&a));
        for (cut = 0; cut < l.len; cut++) {
            int rc = read_mem(a, l.data, cut, &v);
            if (rc != CKPT_EFORMAT) {
                ckpt_test_fail(__FILE__, __LINE__, "%s cut at %zu returned %d: %s", files[i], cut, rc,
                               ckpt_error_last()->message);
                break;
            }
        }
        ckpt_arena_free(a);
        unload(&l);
    }
}

CKPT_TEST(test_pickle_shared_and_recursive_nodes)
{
    loaded l;
    ckpt_value **it;

    ASSERT_OK(load(&l, "pickle/shared.p2.pkl"));
    it = l.root->u.seq.items;
    ASSERT_TRUE(it[0] == it[1]);
    ASSERT_TRUE(ckpt_value_dict_get(it[2], "k") == it[0]);
    ASSERT_TRUE(it[3]->u.seq.items[0] == it[0]);
    unload(&l);

    ASSERT_OK(load(&l, "pickle/recursive.p4.pkl"));
    it = l.root->u.seq.items;
    ASSERT_TRUE(it[0]->u.seq.items[0] == it[0]);
    ASSERT_TRUE(ckpt_value_dict_get(it[1], "self") == it[1]);
    unload(&l);
}

CKPT_TEST(test_pickle_bytes_zero_copy_and_str_copied)
{
    loaded l;
    ckpt_value *big, *s;
    unsigned char out[256];
    size_t i;

    /* Protocol 2: _codecs.encode(text, 'latin1') points at the text inside the input. */
    ASSERT_OK(load(&l, "pickle/bytes.p2.pkl"));
    big = l.root->u.seq.items[2];
    ASSERT_EQ_INT(big->kind, CKPT_VAL_BYTES);
    ASSERT_TRUE(big->flags & CKPT_BYTES_LATIN1_UTF8);
    ASSERT_TRUE(big->u.bytes.ptr > l.data && big->u.bytes.ptr + big->u.bytes.len < l.data + l.len);
    ASSERT_EQ_INT(big->u.bytes.len, 128 + 2 * 128);
    ASSERT_EQ_INT(ckpt_value_bytes_size(big), 256);
    ASSERT_OK(ckpt_value_bytes_decode(big, 0, 256, out));
    for (i = 0; i < 256; i++)
        ASSERT_EQ_INT(out[i], i);
    ASSERT_OK(ckpt_value_bytes_decode(big, 200, 10, out));
    ASSERT_EQ_INT(out[0], 200);
    /* Pure ASCII needs no decoding. */
    ASSERT_EQ_INT(l.root->u.seq.items[1]->flags, 0);
    ASSERT_TRUE(l.root->u.seq.items[4]->flags & CKPT_BYTES_BYTEARRAY);
    unload(&l);

    ASSERT_OK(load(&l, "pickle/bytes.p4.pkl"));
    big = l.root->u.seq.items[2];
    ASSERT_EQ_INT(big->flags, 0);
    ASSERT_TRUE(big->u.bytes.ptr > l.data && big->u.bytes.ptr + 256 < l.data + l.len);
    unload(&l);

    /* Strings are NUL-terminated copies, not pointers into the input. */
    ASSERT_OK(load(&l, "pickle/strings.p4.pkl"));
    for (i = 0; i < l.root->u.seq.n; i++) {
        s = l.root->u.seq.items[i];
        ASSERT_TRUE(s->u.str.ptr < (const char *)l.data || s->u.str.ptr > (const char *)l.data + l.len);
        ASSERT_EQ_INT(s->u.str.ptr[s->u.str.len], 0);
    }
    unload(&l);
}

CKPT_TEST(test_pickle_concatenated_streams)
{
    static const unsigned char two[] = "\x80\x02K\x07.\x80\x04\x8c\x02hi.";
    ckpt_arena *a;
    ckpt_value *v;
    size_t end;

    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_pickle_read(&v, &end, a, two, sizeof two - 1, NULL));
    ASSERT_EQ_INT(v->u.integer, 7);
    ASSERT_EQ_INT(end, 5);
    ASSERT_OK(ckpt_pickle_read(&v, &end, a, two + end, sizeof two - 1 - 5, NULL));
    ASSERT_TRUE(ckpt_value_is_str(v, "hi"));
    ckpt_arena_free(a);
}

/* More memo entries than any fixed cap would allow: the memo is bounded by the input. */
CKPT_TEST(test_pickle_memo_scales_with_input)
{
    const size_t entries = ((size_t)1 << 24) + 1;
    size_t len = 2 + entries * 3 + 2, i;
    unsigned char *p = malloc(len), *q = p;
    ckpt_arena *a;
    ckpt_value *v;

    ASSERT_TRUE(p != NULL);
    *q++ = 0x80, *q++ = 4;
    for (i = 0; i < entries; i++)
        *q++ = ')', *q++ = 0x94, *q++ = '0';
    *q++ = 'N', *q++ = '.';
    ASSERT_OK(ckpt_arena_new(&a));
    ASSERT_OK(ckpt_pickle_read(&v, NULL, a, p, len, NULL));
    ASSERT_EQ_INT(v->kind, CKPT_VAL_NONE);
    ckpt_arena_free(a);
    free(p);
}

CKPT_TEST(test_pickle_options_and_limits)
{
    static const unsigned char memo[] = "\x80\x02(Nq\x00Nq\x01Nq\x02l.";
    static const unsigned char nest[] = "\x80\x02]]]aa.";
    ckpt_pickle_read_options o = CKPT_PICKLE_READ_OPTIONS_INIT;
    ckpt_arena *a;
    ckpt_value *v;

    ASSERT_OK(ckpt_arena_new(&a));
    o.source = "opts.pkl";
    o.max_memo = 2;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_pickle_read(&v, NULL, a, memo, sizeof memo - 1, &o));
    ASSERT_ERROR_MENTIONS("opts.pkl: pickle: memo grows beyond 2 entries at offset 10");
    o.max_memo = 3;
    ASSERT_OK(ckpt_pickle_read(&v, NULL, a, memo, sizeof memo - 1, &o));
    o.max_depth = 1;
    ASSERT_FAILS(CKPT_EFORMAT, ckpt_pickle_read(&v, NULL, a, nest, sizeof nest - 1, &o));
    ASSERT_ERROR_MENTIONS("opts.pkl: pickle: value tree nested deeper than 1 levels at '0/0'");
    o.max_depth = 2;
    ASSERT_OK(ckpt_pickle_read(&v, NULL, a, nest, sizeof nest - 1, &o));
    o.version = 99;
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickle_read(&v, NULL, a, nest, sizeof nest - 1, &o));
    ASSERT_FAILS(CKPT_EINVALID, ckpt_pickle_read(&v, NULL, NULL, nest, sizeof nest - 1, NULL));
    ckpt_arena_free(a);
}

static double seconds_since(clock_t start)
{
    return (double)(clock() - start) / CLOCKS_PER_SEC;
}

CKPT_TEST(test_pickle_recursion_bombs_fail_fast)
{
    size_t n = 1000000, i;
    unsigned char *bomb = malloc(2 * n + 4);
    ckpt_arena *a;
    ckpt_value *v;
    clock_t start;

    ASSERT_TRUE(bomb != NULL);
    ASSERT_OK(ckpt_arena_new(&a));
    /* A million nested MARKs. */
    bomb[0] = 0x80;
    bomb[1] = 2;
    memset(bomb + 2, '(', n);
    bomb[n + 2] = '.';
    start = clock();
    ASSERT_FAILS(CKPT_EFORMAT, read_mem(a, bomb, n + 3, &v));
    ASSERT_ERROR_MENTIONS("MARKs nested deeper than 512");
    /* A million lists, each appended into the one below: a chain a million deep. */
    memset(bomb + 2, ']', n);
    memset(bomb + 2 + n, 'a', n - 1);
    bomb[2 * n + 1] = '.';
    ASSERT_FAILS(CKPT_EFORMAT, read_mem(a, bomb, 2 * n + 2, &v));
    ASSERT_ERROR_MENTIONS("nested deeper than 512 levels");
    /* The same chain through the memo, with a stack that never grows. */
    for (i = 2; i + 7 < 2 * n; i += 6)
        memcpy(bomb + i, "]h\x00q\x00" "0", 6);
    memcpy(bomb + 2, "]q\x00", 3);
    for (i = 5; i + 7 < 2 * n; i += 6)
        memcpy(bomb + i, "]h\x00" "aq\x00", 6);
    memcpy(bomb + i, "0h\x00.", 4);
    ASSERT_FAILS(CKPT_EFORMAT, read_mem(a, bomb, i + 4, &v));
    ASSERT_TRUE(seconds_since(start) < 10.0);
    ckpt_arena_free(a);
    free(bomb);
}

CKPT_TEST(test_pickle_huge_lengths_fail_before_allocating)
{
    static const struct { const char *data; size_t len; } cases[] = {
        { "\x80\x02X\xff\xff\xff\xff", 7 },
        { "\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f", 11 },
        { "\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x80", 11 },
        { "\x80\x05\x96\xff\xff\xff\xff\xff\xff\xff\xff", 11 },
        { "\x80\x02\x8b\xff\xff\xff\x7f", 7 },
        { "\x80\x02T\xff\xff\xff\x7f", 7 },
        { "\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff", 11 },
        { "\x80\x02j\xff\xff\xff\xff", 7 },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt_arena *a;
        ckpt_value *v;
        ASSERT_OK(ckpt_arena_new(&a));
        ASSERT_FAILS(CKPT_EFORMAT, read_mem(a, cases[i].data, cases[i].len, &v));
        ASSERT_TRUE(ckpt_arena_used(a) < 4096);
        ckpt_arena_free(a);
    }
}

/* Quadratic traps: a memo-shared long key set again and again, and long global names
 * repeated through the memo. */
CKPT_TEST(test_pickle_memo_reuse_stays_linear)
{
    size_t key = 65536, reps = 20000, i, pos = 0;
    unsigned char *p = malloc(key + 16 + 5 * reps + 4096 * 2 + 64 + 4 * reps);
    ckpt_arena *a;
    ckpt_value *v;
    clock_t start = clock();

    ASSERT_TRUE(p != NULL);
    ASSERT_OK(ckpt_arena_new(&a));
    memcpy(p, "\x80\x04}X", 4);
    pos = 4;
    p[pos++] = (unsigned char)key;
    p[pos++] = (unsigned char)(key >> 8);
    p[pos++] = (unsigned char)(key >> 16);
    p[pos++] = 0;
    memset(p + pos, 'k', key);
    pos += key;
    memcpy(p + pos, "q\x00" "0", 3);
    pos += 3;
    for (i = 0; i < reps; i++) {
        memcpy(p + pos, "h\x00K\x01s", 5);
        pos += 5;
    }
    p[pos++] = '.';
    ASSERT_OK(read_mem(a, p, pos, &v));
    ASSERT_EQ_INT(v->u.dict.map.n, 1);

    /* Names longer than the input can pay for when repeated. */
    pos = 0;
    memcpy(p, "\x80\x04\x8c\x0f" "collections.abc" "q\x00X\x00\x10\x00\x00", 26);
    pos = 26;
    memset(p + pos, 'n', 4096);
    pos += 4096;
    memcpy(p + pos, "q\x01" "0(", 4);
    pos += 4;
    for (i = 0; i < reps; i++) {
        memcpy(p + pos, "h\x00h\x01\x93" "0", 6);
        pos += 6;
    }
    memcpy(p + pos, "1N.", 3);
    pos += 3;
    ASSERT_FAILS(CKPT_EFORMAT, read_mem(a, p, pos, &v));
    ASSERT_ERROR_MENTIONS("copy more bytes than the input");
    ASSERT_TRUE(seconds_since(start) < 10.0);
    ckpt_arena_free(a);
    free(p);
}

static ckpt_value *read_lit(ckpt_arena *a, const char *pickle, size_t len)
{
    ckpt_value *v = NULL;
    if (read_mem(a, pickle, len, &v) != 0)
        fprintf(stderr, "  %s\n", ckpt_error_last()->message);
    return v;
}

/* A pickle written as a string literal (which may hold NUL bytes). */
#define read_expr(a, lit) read_lit(a, lit, sizeof(lit) - 1)

CKPT_TEST(test_pickle_getattr_only_on_known_classes)
{
    ckpt_arena *a;
    ckpt_value *v, *safe, *bad;

    ASSERT_OK(ckpt_arena_new(&a));
    /* getattr(OrderedDict, 'fromkeys') is known; getattr(OrderedDict, '__init__') and
     * getattr(posix.system-like unknowns) are not. The GLOBAL is shared through the memo. */
    v = read_expr(a, "\x80\x02(c__builtin__\ngetattr\nq\x00" "ccollections\nOrderedDict\nq\x01"
                     "X\x08\x00\x00\x00" "fromkeys\x86R"
                     "h\x00h\x01X\x08\x00\x00\x00__init__\x86R"
                     "h\x00" "cmymod\nThing\nX\x01\x00\x00\x00x\x86R"
                     "h\x00h\x01K\x01\x86Rl.");
    ASSERT_TRUE(v != NULL);
    safe = v->u.seq.items[0];
    ASSERT_EQ_INT(safe->kind, CKPT_VAL_OBJECT);
    ASSERT_EQ_INT(safe->u.obj.callable->flags & CKPT_VALUE_UNSAFE, 0);
    for (int i = 1; i < 4; i++) {
        bad = v->u.seq.items[i];
        ASSERT_TRUE(bad->u.obj.callable->flags & CKPT_VALUE_UNSAFE);
        ASSERT_TRUE(ckpt_value_is_global(bad->u.obj.callable, "builtins", "getattr"));
        ASSERT_TRUE(bad->u.obj.callable != safe->u.obj.callable);
    }
    ASSERT_EQ_INT(safe->u.obj.callable->flags & CKPT_VALUE_UNSAFE, 0);

    /* copyreg._reconstructor(Namespace, object, None) is fine; with an unknown class not. */
    v = read_expr(a, "ccopy_reg\n_reconstructor\n(cargparse\nNamespace\nc__builtin__\nobject\nNtR.");
    ASSERT_TRUE(v && !(v->u.obj.callable->flags & CKPT_VALUE_UNSAFE));
    v = read_expr(a, "ccopy_reg\n_reconstructor\n(cevil\nThing\nc__builtin__\nobject\nNtR.");
    ASSERT_TRUE(v && (v->u.obj.callable->flags & CKPT_VALUE_UNSAFE));
    v = read_expr(a, "\x80\x02" "cposix\nsystem\nX\x07\x00\x00\x00" "echo hi\x85R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_OBJECT && (v->u.obj.callable->flags & CKPT_VALUE_UNSAFE));
    ckpt_arena_free(a);
}

CKPT_TEST(test_pickle_reductions_with_other_shapes_stay_objects)
{
    ckpt_arena *a;
    ckpt_value *v;

    ASSERT_OK(ckpt_arena_new(&a));
    /* A code point above 255 cannot be a latin-1 byte. */
    v = read_expr(a, "\x80\x02" "c_codecs\nencode\nX\x02\x00\x00\x00\xc4\x80X\x06\x00\x00\x00latin1\x86R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_OBJECT);
    v = read_expr(a, "\x80\x02" "c_codecs\nencode\nX\x01\x00\x00\x00" "aX\x05\x00\x00\x00utf-8\x86R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_OBJECT);
    v = read_expr(a, "\x80\x02" "c_codecs\nencode\nX\x02\x00\x00\x00\xc3\xa9X\x07\x00\x00\x00latin-1\x86R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BYTES && ckpt_value_bytes_size(v) == 1);
    v = read_expr(a, "\x80\x02" "ccollections\nOrderedDict\n]\x85R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_OBJECT);
    v = read_expr(a, "\x80\x02" "c__builtin__\nset\n)R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_SET && v->u.seq.n == 0);
    v = read_expr(a, "\x80\x02" "c__builtin__\nfrozenset\nK\x01K\x02\x86\x85R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_FROZENSET && v->u.seq.n == 2);
    v = read_expr(a, "\x80\x02" "c__builtin__\nset\nK\x01\x85R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_OBJECT);
    v = read_expr(a, "\x80\x02" "c__builtin__\nbytearray\nX\x02\x00\x00\x00\xc3\xbfX\x07\x00\x00\x00latin-1\x86R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_BYTES && (v->flags & CKPT_BYTES_BYTEARRAY) && ckpt_value_bytes_size(v) == 1);
    v = read_expr(a, "\x80\x02" "ccopy_reg\n__newobj__\ncargparse\nNamespace\nK\x05\x86R.");
    ASSERT_TRUE(v && v->kind == CKPT_VAL_OBJECT && v->u.obj.how == CKPT_OBJ_NEWOBJ && v->u.obj.args->u.seq.n == 1);
    ASSERT_TRUE(ckpt_value_is_global(v->u.obj.callable, "argparse", "Namespace"));
    ckpt_arena_free(a);
}

CKPT_TEST(test_pickle_protocol0_text_opcodes)
{
    ckpt_arena *a;
    ckpt_value *v, **it;

    ASSERT_OK(ckpt_arena_new(&a));
    v = read_expr(a, "(I01\nI00\nI-42\nL123456789012345678901234567890L\nF-2.5\nS'caf\\xe9 \\'q\\' \\n\\101'\n"
                     "Vx\\u20acy\\U0001f642\\\\z\np7\nT\x03\x00\x00\x00\xff\x00" "aU\x01\xe9g7\nPpid-1\nl.");
    ASSERT_TRUE(v != NULL);
    it = v->u.seq.items;
    ASSERT_TRUE(it[0]->kind == CKPT_VAL_BOOL && it[0]->u.boolean == 1);
    ASSERT_TRUE(it[1]->kind == CKPT_VAL_BOOL && it[1]->u.boolean == 0);
    ASSERT_EQ_INT(it[2]->u.integer, -42);
    ASSERT_EQ_INT(it[3]->kind, CKPT_VAL_BIGINT);
    ASSERT_TRUE(it[4]->u.real == -2.5);
    ASSERT_EQ_STR(it[5]->u.str.ptr, "caf\xc3\xa9 'q' \nA");
    /* raw-unicode-escape leaves other backslashes alone. */
    ASSERT_EQ_STR(it[6]->u.str.ptr, "x\xe2\x82\xac" "y\xf0\x9f\x99\x82\\\\z");
    ASSERT_EQ_INT(it[7]->u.str.len, 4);
    ASSERT_TRUE(memcmp(it[7]->u.str.ptr, "\xc3\xbf\x00" "a", 4) == 0);
    ASSERT_EQ_STR(it[8]->u.str.ptr, "\xc3\xa9");
    ASSERT_TRUE(it[9] == it[6]);
    ASSERT_EQ_INT(it[10]->kind, CKPT_VAL_PERSID);
    ASSERT_TRUE(ckpt_value_is_str(it[10]->u.persid.pid, "pid-1"));

    /* INST with and without arguments, OBJ. */
    v = read_expr(a, "((i__builtin__\ncomplex\n(K\x01K\x02icollections\nOrderedDict\n(ccollections\nOrderedDict\no"
                     "(ccollections\nCounter\n}ol.");
    ASSERT_TRUE(v != NULL);
    it = v->u.seq.items;
    ASSERT_TRUE(it[0]->u.obj.how == CKPT_OBJ_NEWOBJ);
    ASSERT_TRUE(ckpt_value_is_global(it[0]->u.obj.callable, "builtins", "complex"));
    ASSERT_TRUE(it[0]->u.obj.args->u.seq.n == 0);
    ASSERT_TRUE(it[1]->u.obj.how == CKPT_OBJ_REDUCE && it[1]->u.obj.args->u.seq.n == 2);
    ASSERT_TRUE(it[2]->u.obj.how == CKPT_OBJ_NEWOBJ);
    ASSERT_TRUE(it[3]->u.obj.how == CKPT_OBJ_REDUCE && it[3]->u.obj.args->u.seq.n == 1);
    ckpt_arena_free(a);
}

CKPT_TEST(test_pickle_dict_keys_follow_python_equality)
{
    ckpt_arena *a;
    ckpt_value *v;

    ASSERT_OK(ckpt_arena_new(&a));
    v = read_expr(a, "\x80\x02}(X\x01\x00\x00\x00" "aK\x01X\x01\x00\x00\x00" "aK\x02K\x01K\x03\x88K\x04"
                     "G?\xf0\x00\x00\x00\x00\x00\x00K\x05NK\x06NK\x07u.");
    ASSERT_TRUE(v != NULL);
    ASSERT_EQ_INT(v->u.dict.map.n, 3);
    ASSERT_EQ_INT(ckpt_value_dict_get(v, "a")->u.integer, 2);
    ASSERT_EQ_INT(v->u.dict.map.keys[1]->kind, CKPT_VAL_INT);
    ASSERT_EQ_INT(v->u.dict.map.vals[1]->u.integer, 5);
    ASSERT_EQ_INT(v->u.dict.map.vals[2]->u.integer, 7);
    ckpt_arena_free(a);
}

CKPT_TEST(test_pickle_known_globals)
{
    static const char *const known[][2] = {
        { "torch._utils", "_rebuild_tensor_v2" }, { "torch._utils", "_rebuild_parameter" },
        { "torch", "BFloat16Storage" }, { "torch.cuda", "QUInt2x4Storage" }, { "torch", "float8_e4m3fn" },
        { "torch", "bfloat16" }, { "torch.storage", "UntypedStorage" }, { "torch", "Size" },
        { "collections", "OrderedDict" }, { "__builtin__", "set" }, { "builtins", "frozenset" },
        { "__builtin__", "xrange" }, { "copy_reg", "_reconstructor" }, { "_codecs", "encode" },
        { "numpy.core.multiarray", "_reconstruct" }, { "numpy._core.multiarray", "scalar" },
        { "numpy.dtypes", "UInt32DType" }, { "numpy.random._pickle", "__randomstate_ctor" },
        { "argparse", "Namespace" }, { "megatron.core.transformer.enums", "AttnBackend" },
        { "deepspeed.runtime.zero.config", "ZeroStageEnum" }, { "transformer_engine.common.recipe", "Format" },
        { "megatron.core.extensions.transformer_engine", "TEDelayedScaling" }, { "torch._C", "Generator" },
        { "builtins", "getattr" }, { "pathlib", "PosixPath" }, { "_io", "BytesIO" }, { "signal", "Signals" },
        { "torch.distributed.checkpoint.planner", "SavePlan" }, { "torch.distributed.checkpoint.planner", "ReadItem" },
    };
    static const char *const unknown[][2] = {
        { "posix", "system" }, { "os", "system" }, { "nt", "system" }, { "subprocess", "Popen" },
        { "builtins", "eval" }, { "__builtin__", "exec" }, { "builtins", "compile" }, { "builtins", "open" },
        { "builtins", "__import__" }, { "torch", "load" }, { "torch._utils", "_rebuild" }, { "", "" },
        { "torch", "FloatStorageX" }, { "zzz", "a" }, { "_codecs", "decode" },
        /* the planner's data classes only, not the planners (code) */
        { "torch.distributed.checkpoint.planner", "SavePlanner" },
        { "torch.distributed.checkpoint.default_planner", "DefaultSavePlanner" },
    };
    size_t i, n = 0;
    char line[256], prev_module[256] = "", prev_name[256] = "", *name;
    FILE *f;

    for (i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!ckpt_pickle_global_known(known[i][0], known[i][1]))
            ckpt_test_fail(__FILE__, __LINE__, "%s.%s should be known", known[i][0], known[i][1]);
    for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        if (ckpt_pickle_global_known(unknown[i][0], unknown[i][1]))
            ckpt_test_fail(__FILE__, __LINE__, "%s.%s should be unknown", unknown[i][0], unknown[i][1]);
    /* Every name in the reference list (one "module name" per line) is found. */
    f = fopen(ckpt_test_data("pickle/known_globals.txt"), "r");
    ASSERT_TRUE(f != NULL);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || !(name = strchr(line, ' ')))
            continue;
        *name++ = '\0';
        n++;
        if (!ckpt_pickle_global_known(line, name))
            ckpt_test_fail(__FILE__, __LINE__, "%s.%s from the list is not known", line, name);
        /* The list, like the table it mirrors, is sorted for bsearch. */
        if (n > 1 && (strcmp(prev_module, line) > 0 ||
                      (strcmp(prev_module, line) == 0 && strcmp(prev_name, name) >= 0)))
            ckpt_test_fail(__FILE__, __LINE__, "%s.%s is out of order", line, name);
        snprintf(prev_module, sizeof prev_module, "%s", line);
        snprintf(prev_name, sizeof prev_name, "%s", name);
    }
    fclose(f);
    ASSERT_TRUE(n > 250);
}

/* `_codecs.encode(text, 'latin1')` with the text's bytes at every alignment: the scan
 * takes eight bytes at a time, so lead bytes at word ends and bad bytes anywhere matter. */
static size_t encode_pickle(uint8_t *out, const uint8_t *text, size_t n)
{
    size_t pos = 0;

    memcpy(out, "\x80\x02" "c_codecs\nencode\nX", 19);
    pos = 19;
    out[pos++] = (uint8_t)n;
    out[pos++] = 0;
    out[pos++] = 0;
    out[pos++] = 0;
    memcpy(out + pos, text, n);
    pos += n;
    memcpy(out + pos, "X\x06\x00\x00\x00latin1\x86R.", 14);
    return pos + 14;
}

CKPT_TEST(test_pickle_latin1_text_at_every_alignment)
{
    uint8_t raw[64], text[128], pk[256], out[64];
    ckpt_arena *a;
    ckpt_value *v;
    size_t n, len, i, k, cut;
    unsigned seed = 12345;

    ASSERT_OK(ckpt_arena_new(&a));
    for (n = 0; n < 48; n++) {
        for (k = 0; k < 20; k++) {
            for (i = 0, len = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                raw[i] = (uint8_t)((seed >> 16) % 3 ? (seed >> 8) & 0xFF : (seed >> 8) & 0x7F);
                if (raw[i] < 0x80) {
                    text[len++] = raw[i];
                } else {
                    text[len++] = (uint8_t)(0xC0 | (raw[i] >> 6));
                    text[len++] = (uint8_t)(0x80 | (raw[i] & 0x3F));
                }
            }
            ASSERT_OK(read_mem(a, pk, encode_pickle(pk, text, len), &v));
            ASSERT_EQ_INT(v->kind, CKPT_VAL_BYTES);
            ASSERT_EQ_INT(ckpt_value_bytes_size(v), n);
            ASSERT_OK(ckpt_value_bytes_decode(v, 0, n, out));
            ASSERT_TRUE(n == 0 || memcmp(out, raw, n) == 0);
            /* A code point of 256 anywhere keeps it a call. */
            for (cut = 0; cut <= len && len + 2 < sizeof text; cut += 5) {
                uint8_t big[130];
                while (cut < len && (text[cut] & 0xC0) == 0x80)
                    cut++;
                memcpy(big, text, cut);
                big[cut] = 0xC4;
                big[cut + 1] = 0x80;
                memcpy(big + cut + 2, text + cut, len - cut);
                ASSERT_OK(read_mem(a, pk, encode_pickle(pk, big, len + 2), &v));
                ASSERT_EQ_INT(v->kind, CKPT_VAL_OBJECT);
            }
            /* Any byte changed leaves a lead without its continuation or a stray
             * continuation. */
            for (cut = 0; cut < len; cut += 3) {
                uint8_t bad[130];
                memcpy(bad, text, len);
                bad[cut] = text[cut] < 0x80 ? 0xA9 : 'x';
                ASSERT_FAILS(CKPT_EFORMAT, read_mem(a, pk, encode_pickle(pk, bad, len), &v));
            }
        }
    }
    ckpt_arena_free(a);
}
