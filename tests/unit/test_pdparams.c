/* pdparams: the files real paddle.save wrote (testdata/paddle) and pickles crafted here
 * with numpy in the byte format paddle writes read back with the right names, dtypes,
 * shapes and bytes; broken and unsupported files are refused with messages that name the
 * key; what we write loads in Python (numpy + pickle, as paddle.load does) and through our
 * reader to the same arrays and values. Python with numpy is required: without it these
 * tests fail. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <zstd.h>

#define PYTHON "/usr/bin/python3"
#define CHUNK_ELEMS (1 << 20)

static const char py_prelude[] =
    "import hashlib, json, pickle, sys\n"
    "import numpy as np\n"
    "def save(obj, path, protocol=4):\n"
    "    with open(path, 'wb') as f:\n"
    "        pickle.dump(obj, f, protocol=protocol)\n"
    "def load(path):\n"
    "    with open(path, 'rb') as f:\n"
    "        return pickle.load(f, encoding='latin1')\n"
    "class Raw:\n"
    "    def __init__(self, *r): self.r = r\n"
    "    def __reduce__(self): return self.r\n"
    "def le(a):\n"
    "    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder('<')).tobytes()\n"
    "def same(a, b, path='root'):\n"
    "    if isinstance(a, np.ndarray):\n"
    "        ok = (isinstance(b, np.ndarray) and a.dtype.kind == b.dtype.kind\n"
    "              and a.dtype.itemsize == b.dtype.itemsize\n"
    "              and b.dtype.byteorder in '<|=' and b.flags.c_contiguous and a.shape == b.shape and le(a) == le(b))\n"
    "    elif isinstance(a, dict):\n"
    "        ok = type(a) is type(b) and list(a) == list(b) and all([same(a[k], b[k], f'{path}/{k}') for k in a])\n"
    "    elif isinstance(a, (list, tuple)):\n"
    "        ok = type(a) is type(b) and len(a) == len(b)\n"
    "        ok = ok and all([same(x, y, f'{path}/{i}') for i, (x, y) in enumerate(zip(a, b))])\n"
    "    else:\n"
    "        ok = type(a) is type(b) and a == b\n"
    "    if not ok:\n"
    "        print('differs at', path, repr(a)[:120], repr(b)[:120])\n"
    "    return ok\n"
    /* Every dtype paddle files hold, odd layouts, and the non-tensor entries paddle keeps. */
    "def model():\n"
    "    m = {}\n"
    "    m['llama.embed_tokens.weight'] = np.arange(6, dtype='f4').reshape(2, 3) - 2.5\n"
    "    m['llama.norm.weight'] = np.array([0x3F80, 0x4000, 0xBF80], dtype='u2')\n"
    "    m['half'] = np.array([1.5, -2.0, 65504.0], dtype='f2')\n"
    "    m['f64'] = np.array([1e300, -0.25])\n"
    "    m['i8'] = np.array([[1, -2], [3, -(2**62)]], dtype='i8')\n"
    "    m['i4'] = np.array([7, -7], dtype='i4')\n"
    "    m['i2'] = np.array([300, -300], dtype='i2')\n"
    "    m['i1'] = np.array([-128, 127], dtype='i1')\n"
    "    m['u1'] = np.array([0, 200, 255], dtype='u1')\n"
    "    m['u4'] = np.array([2**32 - 1], dtype='u4')\n"
    "    m['u8'] = np.array([2**64 - 1], dtype='u8')\n"
    "    m['flag'] = np.array([True, False, True])\n"
    "    m['c8'] = np.array([1 + 2j, complex(0, -3)], dtype='c8')\n"
    "    m['c16'] = np.array([complex(0.5, -8)], dtype='>c16')\n"
    "    m['scalar'] = np.array(2.5)\n"
    "    m['empty'] = np.zeros((0, 3), dtype='f4')\n"
    "    m['fortran'] = np.asfortranarray(np.arange(12, dtype='f4').reshape(3, 4))\n"
    "    m['big_endian'] = (np.arange(5) * 1000).astype('>i4')\n"
    "    m['nested'] = {'inner': np.array([9.0, -9.0], dtype='f4'), 'lr': 0.001}\n"
    "    m['LR_Scheduler'] = {'last_epoch': 3, 'last_lr': 0.0005}\n"
    "    m['StructuredToParameterName@@'] = {'llama.embed_tokens.weight': 'embedding_0.w_0',\n"
    "                                         'llama.norm.weight': 'norm_0.w_0'}\n"
    "    return m\n";

static int run_python(const char *body)
{
    FILE *f = fopen("script.py", "w");
    int rc;

    if (!f)
        return -1;
    fputs(py_prelude, f);
    fputs(body, f);
    fclose(f);
    rc = system(PYTHON " script.py");
    if (rc != 0)
        fprintf(stderr, "  %s script.py exited with %d\n", PYTHON, rc);
    return rc == 0 ? 0 : -1;
}

#define PY(body) ASSERT_TRUE(run_python(body) == 0)

static int open_pd(ckpt_ckpt **c, const char *path)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    o.format = "pdparams";
    return ckpt_open(c, path, &o);
}

static int convert(const ckpt_ckpt *in, const char *out, int protocol, ckpt_unknown_policy unknown)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_convert_report report;
    int rc;

    o.protocol = protocol;
    o.unknown = unknown;
    o.overwrite = 1;
    rc = ckpt_convert(in, out, &o, &report);
    ckpt_convert_report_dispose(&report);
    return rc;
}

static int has_note(const ckpt_ckpt *c, const char *text)
{
    size_t i;
    for (i = 0; i < ckpt_note_count(c); i++)
        if (strstr(ckpt_note_at(c, i), text))
            return 1;
    return 0;
}

static int values_are(const ckpt_tensor *t, const double *want, size_t n)
{
    double got[16];
    size_t i;

    if (!t || n > 16 || (size_t)ckpt_tensor_numel(t) != n ||
        ckpt_tensor_read(t, 0, (int64_t)n, CKPT_DTYPE_F64, got) < 0)
        return 0;
    for (i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "  %s[%zu] = %g, expected %g\n", t->name, i, got[i], want[i]);
            return 0;
        }
    return 1;
}

static int shape_is(const ckpt_tensor *t, ckpt_dtype dtype, int ndim, int64_t d0, int64_t d1)
{
    return t && t->dtype == dtype && t->ndim == ndim && (ndim < 1 || t->shape[0] == d0) &&
           (ndim < 2 || t->shape[1] == d1);
}

/* Same names, dtypes, shapes and bytes (read in chunks, so big tensors need little memory). */
static int same_tensors(const ckpt_ckpt *a, const ckpt_ckpt *b)
{
    size_t i, item;
    int ok = ckpt_tensor_count(a) == ckpt_tensor_count(b);
    unsigned char *x = NULL, *y = NULL;

    for (i = 0; ok && i < ckpt_tensor_count(a); i++) {
        const ckpt_tensor *s = ckpt_tensor_at(a, i), *t = ckpt_tensor_at(b, i);
        int64_t n = ckpt_tensor_numel(s), at;
        ok = strcmp(s->name, t->name) == 0 && s->dtype == t->dtype && s->ndim == t->ndim &&
             memcmp(s->shape, t->shape, (size_t)s->ndim * sizeof s->shape[0]) == 0;
        item = ckpt_dtype_size(s->dtype);
        if (ok && !x) {
            x = malloc((size_t)CHUNK_ELEMS * 16);
            y = malloc((size_t)CHUNK_ELEMS * 16);
        }
        for (at = 0; ok && at < n; at += CHUNK_ELEMS) {
            int64_t k = n - at < CHUNK_ELEMS ? n - at : CHUNK_ELEMS;
            ok = x && y && ckpt_tensor_read(s, at, k, s->dtype, x) == 0 &&
                 ckpt_tensor_read(t, at, k, t->dtype, y) == 0 && memcmp(x, y, (size_t)k * item) == 0;
        }
        if (!ok)
            fprintf(stderr, "  tensor %zu (%s) differs\n", i, s->name);
    }
    if (!ok && ckpt_tensor_count(a) != ckpt_tensor_count(b))
        fprintf(stderr, "  %zu tensors against %zu\n", ckpt_tensor_count(a), ckpt_tensor_count(b));
    free(x);
    free(y);
    return ok;
}

/* "<stem>.manifest": name, dtype, shape and a file with the C-order bytes of each tensor,
 * for Python to compare with the fixture's expected JSON. */
static int dump_manifest(const ckpt_ckpt *c, const char *stem)
{
    char path[256];
    FILE *m;
    size_t i;
    int d, ok = 1;

    snprintf(path, sizeof path, "%s.manifest", stem);
    if (!(m = fopen(path, "w")))
        return 0;
    for (i = 0; ok && i < ckpt_tensor_count(c); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(c, i);
        size_t len = (size_t)ckpt_tensor_nbytes(t);
        unsigned char *bytes = malloc(len ? len : 1);
        snprintf(path, sizeof path, "%s.%zu.bin", stem, i);
        fprintf(m, "%s\t%s\t", t->name, ckpt_dtype_name(t->dtype));
        for (d = 0; d < t->ndim; d++)
            fprintf(m, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        fprintf(m, "\t%s\n", path);
        ok = bytes && ckpt_tensor_read(t, 0, ckpt_tensor_numel(t), t->dtype, bytes) == 0;
        if (ok)
            ckpt_test_write_file(path, bytes, len);
        free(bytes);
    }
    fclose(m);
    return ok;
}

static const char *const fixtures[] = { "fp32.pdparams", "fp32_p2.pdparams", "fp16.pdparams", "bf16.pdparams",
                                        "bf16_p2.pdparams", "adamw_fp32.pdopt", "adamw_bf16_master.pdopt" };
#define N_FIXTURES (sizeof fixtures / sizeof fixtures[0])

static void stem_of(const char *file, char *stem, size_t cap)
{
    snprintf(stem, cap, "%.*s", (int)strcspn(file, "."), file);
}

CKPT_TEST(test_pdparams_reads_real_paddle_files)
{
    char stem[64], script[8192];
    size_t i, at = 0;

    at += (size_t)snprintf(script + at, sizeof script - at,
                           "def check(stem, expected):\n"
                           "    want = json.load(open(expected))['tensors']\n"
                           "    rows = [l.rstrip('\\n').split('\\t') for l in open(stem + '.manifest')]\n"
                           "    assert len(rows) == len(want), (stem, len(rows), len(want))\n"
                           "    for (name, dtype, shape, path), t in zip(rows, want):\n"
                           "        assert (name, dtype) == (t['name'], t['dtype']), (stem, name, dtype, t)\n"
                           "        assert [int(x) for x in shape.split(',') if x] == t['shape'], (stem, name, shape)\n"
                           "        digest = hashlib.sha256(open(path, 'rb').read()).hexdigest()\n"
                           "        assert digest == t['sha256'], (stem, name)\n");
    for (i = 0; i < N_FIXTURES; i++) {
        char rel[128];
        ckpt_ckpt *c;
        snprintf(rel, sizeof rel, "paddle/%s", fixtures[i]);
        stem_of(fixtures[i], stem, sizeof stem);
        ASSERT_OK(ckpt_open(&c, ckpt_test_data(rel), NULL)); /* found by bidding */
        ASSERT_EQ_STR(ckpt_format_name(c), "pdparams");
        ASSERT_TRUE(dump_manifest(c, stem));
        ASSERT_EQ_INT(has_note(c, "uint16 arrays read as bfloat16"), strncmp(stem, "bf16", 4) == 0);
        ckpt_close(c);
        snprintf(rel, sizeof rel, "paddle/expected/%s.json", stem);
        at += (size_t)snprintf(script + at, sizeof script - at, "check('%s', '%s')\n", stem, ckpt_test_data(rel));
    }
    PY(script);
}

CKPT_TEST(test_pdparams_bids_for_paddle_pickles_only)
{
    static const char *const torch_files[] = { "torch/basic.pt", "torch/legacy.pt", "torch/proto4.pt" };
    ckpt_ckpt *c;
    size_t i;

    PY("save({'w': np.ones(2, dtype='f4')}, 'weights.bin', 2)\n");
    ASSERT_OK(ckpt_open(&c, "weights.bin", NULL));
    ASSERT_EQ_STR(ckpt_format_name(c), "pdparams");
    ckpt_close(c);
    for (i = 0; i < sizeof torch_files / sizeof torch_files[0]; i++) {
        ASSERT_OK(ckpt_open(&c, ckpt_test_data(torch_files[i]), NULL));
        ASSERT_EQ_STR(ckpt_format_name(c), "torch");
        ckpt_close(c);
    }
}

CKPT_TEST(test_pdparams_keeps_paddle_metadata_and_pairs)
{
    const ckpt_value *root, *mw, *pair, *node, *table;
    const ckpt_tensor *t;
    ckpt_ckpt *c;

    ASSERT_OK(open_pd(&c, ckpt_test_data("paddle/adamw_bf16_master.pdopt")));
    root = ckpt_root(c);
    t = ckpt_tensor_find(c, "master_weights/linear_0.w_0/1");
    ASSERT_TRUE(shape_is(t, CKPT_DTYPE_F32, 2, 8, 12));
    mw = ckpt_value_dict_get(root, "master_weights");
    ASSERT_TRUE(mw && mw->kind == CKPT_VAL_DICT);
    pair = ckpt_value_dict_get(mw, "linear_0.w_0");
    ASSERT_TRUE(pair && pair->kind == CKPT_VAL_TUPLE && pair->u.seq.n == 2);
    ASSERT_TRUE(ckpt_value_is_str(pair->u.seq.items[0], "linear_0.w_0_fp32_master_0"));
    node = pair->u.seq.items[1];
    ASSERT_TRUE(node->kind == CKPT_VAL_TENSOR && ckpt_tensor_at(c, node->u.tensor.index) == t);
    ASSERT_TRUE(node->u.tensor.source && node->u.tensor.source->kind == CKPT_VAL_OBJECT);
    ASSERT_TRUE(ckpt_value_dict_get(ckpt_value_dict_get(root, "LR_Scheduler"), "last_epoch") != NULL);
    ckpt_close(c);

    ASSERT_OK(open_pd(&c, ckpt_test_data("paddle/fp32.pdparams")));
    table = ckpt_value_dict_get(ckpt_root(c), "StructuredToParameterName@@");
    ASSERT_TRUE(table && table->kind == CKPT_VAL_DICT && table->u.dict.map.n == ckpt_tensor_count(c));
    ASSERT_TRUE(ckpt_tensor_find(c, table->u.dict.map.keys[0]->u.str.ptr) == ckpt_tensor_at(c, 0));
    ckpt_close(c);
}

static void check_model(const char *path, int latin1)
{
    static const double embed[] = { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5 }, bf16[] = { 1, 2, -1 },
                        half[] = { 1.5, -2, 65504 }, i8[] = { 1, -2, 3, -4611686018427387904.0 },
                        u1[] = { 0, 200, 255 }, flag[] = { 1, 0, 1 }, scalar[] = { 2.5 },
                        fortran[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, be[] = { 0, 1000, 2000, 3000, 4000 },
                        inner[] = { 9, -9 };
    static const float c8[] = { 1, 2, 0, -3 };
    static const double c16[] = { 0.5, -8 };
    const ckpt_tensor *t;
    double c16buf[2];
    float cbuf[4];
    ckpt_ckpt *c;

    ASSERT_OK(open_pd(&c, path));
    ASSERT_EQ_INT(ckpt_tensor_count(c), 19);
    ASSERT_EQ_STR(ckpt_tensor_at(c, 0)->name, "llama.embed_tokens.weight");
    ASSERT_TRUE(values_are(ckpt_tensor_at(c, 0), embed, 6) && shape_is(ckpt_tensor_at(c, 0), CKPT_DTYPE_F32, 2, 2, 3));
    ASSERT_TRUE(values_are(t = ckpt_tensor_find(c, "llama.norm.weight"), bf16, 3) && t->dtype == CKPT_DTYPE_BF16);
    ASSERT_TRUE(has_note(c, "uint16 arrays read as bfloat16, as paddle.load does"));
    ASSERT_TRUE(values_are(t = ckpt_tensor_find(c, "half"), half, 3) && t->dtype == CKPT_DTYPE_F16);
    ASSERT_TRUE(values_are(t = ckpt_tensor_find(c, "i8"), i8, 4) && shape_is(t, CKPT_DTYPE_I64, 2, 2, 2));
    ASSERT_TRUE(shape_is(ckpt_tensor_find(c, "f64"), CKPT_DTYPE_F64, 1, 2, 0));
    ASSERT_TRUE(shape_is(ckpt_tensor_find(c, "i4"), CKPT_DTYPE_I32, 1, 2, 0));
    ASSERT_TRUE(shape_is(ckpt_tensor_find(c, "i2"), CKPT_DTYPE_I16, 1, 2, 0));
    ASSERT_TRUE(shape_is(ckpt_tensor_find(c, "i1"), CKPT_DTYPE_I8, 1, 2, 0));
    ASSERT_TRUE(values_are(t = ckpt_tensor_find(c, "u1"), u1, 3) && t->dtype == CKPT_DTYPE_U8);
    ASSERT_TRUE(shape_is(ckpt_tensor_find(c, "u4"), CKPT_DTYPE_U32, 1, 1, 0));
    ASSERT_TRUE(shape_is(ckpt_tensor_find(c, "u8"), CKPT_DTYPE_U64, 1, 1, 0));
    ASSERT_TRUE(values_are(t = ckpt_tensor_find(c, "flag"), flag, 3) && t->dtype == CKPT_DTYPE_BOOL);
    ASSERT_TRUE((t = ckpt_tensor_find(c, "c8")) && t->dtype == CKPT_DTYPE_C64);
    ASSERT_OK(ckpt_tensor_read(t, 0, 2, CKPT_DTYPE_C64, cbuf));
    ASSERT_TRUE(memcmp(cbuf, c8, sizeof c8) == 0);
    ASSERT_TRUE((t = ckpt_tensor_find(c, "c16")) && t->dtype == CKPT_DTYPE_C128 && t->storage->byteswap);
    ASSERT_OK(ckpt_tensor_read(t, 0, 1, CKPT_DTYPE_C128, c16buf));
    ASSERT_TRUE(memcmp(c16buf, c16, sizeof c16) == 0);
    ASSERT_TRUE(values_are(t = ckpt_tensor_find(c, "scalar"), scalar, 1) && shape_is(t, CKPT_DTYPE_F64, 0, 0, 0));
    ASSERT_TRUE(shape_is(t = ckpt_tensor_find(c, "empty"), CKPT_DTYPE_F32, 2, 0, 3) && ckpt_tensor_numel(t) == 0);
    /* Fortran order: a column-major view, read back in C order. */
    t = ckpt_tensor_find(c, "fortran");
    ASSERT_TRUE(values_are(t, fortran, 12) && shape_is(t, CKPT_DTYPE_F32, 2, 3, 4));
    ASSERT_TRUE(t->stride[0] == 1 && t->stride[1] == 3);
    ASSERT_TRUE(values_are(t = ckpt_tensor_find(c, "big_endian"), be, 5) && t->storage->byteswap);
    ASSERT_TRUE(values_are(ckpt_tensor_find(c, "nested/inner"), inner, 2));
    t = ckpt_tensor_at(c, 0);
    ASSERT_EQ_INT(t->storage->extents[0].encoding, latin1 ? CKPT_EXTENT_LATIN1_UTF8 : CKPT_EXTENT_RAW);
    ASSERT_TRUE(ckpt_value_dict_get(ckpt_root(c), "StructuredToParameterName@@")->kind == CKPT_VAL_DICT);
    ASSERT_TRUE(ckpt_value_dict_get(ckpt_root(c), "llama.norm.weight")->kind == CKPT_VAL_TENSOR);
    ckpt_close(c);
}

CKPT_TEST(test_pdparams_reads_every_dtype_and_layout)
{
    PY("save(model(), 'p4.pdparams', 4)\n"
       "save(model(), 'p3.pdparams', 3)\n"
       "save(model(), 'p2.pdparams', 2)\n");
    check_model("p4.pdparams", 0);
    check_model("p3.pdparams", 0);
    /* protocol 2: data as UTF-8 text of latin-1 code points, decoded on read */
    check_model("p2.pdparams", 1);
}

/* Long protocol-2 data is read through many extents; its bytes must not change. */
CKPT_TEST(test_pdparams_reads_long_latin1_data)
{
    ckpt_ckpt *p2, *p4;

    PY("a = np.random.default_rng(5).integers(0, 256, size=3 * 2**20 + 12345, dtype='u1')\n"
       "save({'a': a, 'b': a[:-1].view('<u2')[1:-5]}, 'p2.pdparams', 2)\n"
       "save({'a': a, 'b': a[:-1].view('<u2')[1:-5]}, 'p4.pdparams', 4)\n");
    ASSERT_OK(open_pd(&p2, "p2.pdparams"));
    ASSERT_OK(open_pd(&p4, "p4.pdparams"));
    ASSERT_EQ_INT(ckpt_tensor_at(p2, 0)->storage->n_extents, 4);
    ASSERT_EQ_INT(ckpt_tensor_at(p2, 0)->storage->extents[3].size, 12345);
    ASSERT_TRUE(same_tensors(p2, p4));
    ckpt_close(p2);
    ckpt_close(p4);
}

/* Parts as paddle.save writes them under protocol 2 and 3, small enough for a unit test. */
static const char split_script[] =
    "def split(protocol, path, parts=('w@@.0', 'w@@.1', 'w@@.2'), cut=(0, 4, 8, 10), dtypes=('f4',) * 3):\n"
    "    flat = np.arange(10, dtype='f4') * 1.5 - 4\n"
    "    d = {'a': np.ones(2, dtype='f4'), 'StructuredToParameterName@@': {'a': 'x_0', 'w': 'x_1'}}\n"
    "    d.update({f'e{i}': np.full(1, i, dtype='i8') for i in range(10)})\n"
    "    for i, p in enumerate(parts):\n"
    "        d[p] = flat[cut[i]:cut[i + 1]].astype(dtypes[i])\n"
    "    d['UnpackBigParamInfor@@'] = {'w': {'OriginShape': (2, 5), 'slices': ['w@@.0', 'w@@.1', 'w@@.2']}}\n"
    "    save(d, path, protocol)\n";

CKPT_TEST(test_pdparams_reassembles_split_arrays)
{
    static const double w[] = { -4, -2.5, -1, 0.5, 2, 3.5, 5, 6.5, 8, 9.5 };
    static const char *const files[] = { "s2.pdparams", "s4.pdparams" };
    const ckpt_value *root, *node;
    const ckpt_tensor *t;
    ckpt_ckpt *c;
    size_t i;
    char script[2048];

    snprintf(script, sizeof script, "%ssplit(2, 's2.pdparams')\nsplit(4, 's4.pdparams')\n", split_script);
    PY(script);
    for (i = 0; i < 2; i++) {
        ASSERT_OK(open_pd(&c, files[i]));
        ASSERT_EQ_INT(ckpt_tensor_count(c), 12);
        t = ckpt_tensor_at(c, 11);
        ASSERT_TRUE(ckpt_tensor_find(c, "w") == t);
        ASSERT_TRUE(values_are(t, w, 10) && shape_is(t, CKPT_DTYPE_F32, 2, 2, 5));
        ASSERT_EQ_INT(t->storage->n_extents, 3);
        ASSERT_TRUE(has_note(c, "reassembled w from 3 parts"));
        /* The parts' place in the dict, big enough to be indexed by key when read. */
        root = ckpt_root(c);
        ASSERT_EQ_INT(root->u.dict.map.n, 13);
        ASSERT_TRUE(ckpt_value_is_str(root->u.dict.map.keys[12], "w"));
        node = root->u.dict.map.vals[12];
        ASSERT_TRUE(ckpt_value_dict_get(root, "w") == node);
        ASSERT_TRUE(node->kind == CKPT_VAL_TENSOR && node->u.tensor.index == 11);
        ASSERT_TRUE(ckpt_value_dict_get(root, "e9") == root->u.dict.map.vals[11]);
        ASSERT_TRUE(ckpt_value_dict_get(root, "UnpackBigParamInfor@@") == NULL);
        ASSERT_TRUE(ckpt_value_dict_get(root, "w@@.0") == NULL);
        ckpt_close(c);
    }
}

CKPT_TEST(test_pdparams_refuses_broken_split_arrays)
{
    char script[4096];
    ckpt_ckpt *c;

    snprintf(script, sizeof script,
             "%s"
             "split(2, 'missing.pdparams', parts=('w@@.0', 'w@@.1'), cut=(0, 4, 8))\n"
             "split(4, 'short.pdparams', cut=(0, 4, 8, 9))\n"
             "split(4, 'dtype.pdparams', dtypes=('f4', 'f8', 'f4'))\n",
             split_script);
    PY(script);
    ASSERT_FAILS(CKPT_EFORMAT, open_pd(&c, "missing.pdparams"));
    ASSERT_ERROR_MENTIONS("w@@.2");
    ASSERT_FAILS(CKPT_EFORMAT, open_pd(&c, "short.pdparams"));
    ASSERT_ERROR_MENTIONS("36 bytes, the original shape needs 40 (w)");
    ASSERT_FAILS(CKPT_EFORMAT, open_pd(&c, "dtype.pdparams"));
    ASSERT_ERROR_MENTIONS("w@@.1");
}

CKPT_TEST(test_pdparams_refuses_malformed_and_unsupported_entries)
{
    unsigned char *data;
    size_t len;
    ckpt_ckpt *c;

    PY("mk = np.core.multiarray._reconstruct\n"
       "def arr(shape, typestr, data):\n"
       "    return Raw(mk, (np.ndarray, (0,), b'b'), (1, shape, np.dtype(typestr), False, data))\n"
       "save({'ok': np.ones(3), 'w': arr((2, 3), 'f4', b'\\0' * 20)}, 'length.pdparams')\n"
       "save({'lod': Raw(eval, ('data', {'data': np.ones(2)}))}, 'eval.pdparams', 2)\n"
       "save({'obj': np.array([1, 'a'], dtype=object)}, 'object.pdparams')\n"
       "save({'s': np.array(['abc'])}, 'unicode.pdparams')\n"
       "save({'neg': arr((-1, 3), 'f4', b'')}, 'negative.pdparams')\n"
       "import types\n"
       "mod = types.ModuleType('paddle')\n"
       "class Tensor: pass\n"
       "Tensor.__module__ = 'paddle'\n"
       "mod.Tensor = Tensor\n"
       "sys.modules['paddle'] = mod\n"
       "save({'t': Tensor()}, 'paddle_object.pdparams')\n");
    ASSERT_FAILS(CKPT_EFORMAT, open_pd(&c, "length.pdparams"));
    ASSERT_ERROR_MENTIONS("array data is 20 bytes, its shape and dtype need 24 (w)");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_pd(&c, "eval.pdparams"));
    ASSERT_ERROR_MENTIONS("builtins.eval");
    ASSERT_ERROR_MENTIONS("lod");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_pd(&c, "object.pdparams"));
    ASSERT_ERROR_MENTIONS("dtype object are not supported (obj)");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_pd(&c, "unicode.pdparams"));
    ASSERT_ERROR_MENTIONS("'U3'");
    ASSERT_FAILS(CKPT_EFORMAT, open_pd(&c, "negative.pdparams"));
    ASSERT_ERROR_MENTIONS("(neg)");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_pd(&c, "paddle_object.pdparams"));
    ASSERT_ERROR_MENTIONS("paddle.Tensor");

    /* Cut short: the pickle VM finds no STOP. */
    data = ckpt_test_read_file(ckpt_test_data("paddle/fp32.pdparams"), &len);
    ASSERT_TRUE(data != NULL);
    ckpt_test_write_file("cut.pdparams", data, len / 2);
    free(data);
    ASSERT_FAILS(CKPT_EFORMAT, open_pd(&c, "cut.pdparams"));
    ASSERT_ERROR_MENTIONS("cut.pdparams");
    ASSERT_FAILS(CKPT_EFORMAT, open_pd(&c, ckpt_test_data("bad/truncated.pdparams")));
}

/* Write `in` with each protocol, read our output back (same tensors) and load it in
 * Python (same objects as `expect`, a Python expression, when the file was loaded). */
static void round_trip(const char *in, const char *expect, const int *protocols, size_t n)
{
    char out[64], script[1024];
    ckpt_ckpt *a, *b;
    size_t i;

    ASSERT_OK(open_pd(&a, in));
    for (i = 0; i < n; i++) {
        snprintf(out, sizeof out, "out_p%d.pdparams", protocols[i]);
        ASSERT_OK(convert(a, out, protocols[i], CKPT_UNKNOWN_REFUSE));
        ASSERT_OK(open_pd(&b, out));
        ASSERT_TRUE(same_tensors(a, b));
        ckpt_close(b);
        snprintf(script, sizeof script,
                 "raw = open('%s', 'rb').read(3)\n"
                 "assert raw[:2] == bytes([0x80, %d]), raw\n"
                 "assert same(%s, load('%s'))\n",
                 out, protocols[i] ? protocols[i] : 4, expect, out);
        PY(script);
    }
    ckpt_close(a);
}

CKPT_TEST(test_pdparams_writes_what_numpy_loads)
{
    static const int protocols[] = { 0, 2, 4 };
    PY("save(model(), 'in.pdparams', 2)\n");
    /* Fortran and big-endian arrays come out C-ordered little-endian with equal values. */
    round_trip("in.pdparams", "model()", protocols, 3);
}

CKPT_TEST(test_pdparams_writes_real_paddle_files_back)
{
    static const int p4[] = { 0 }, p2[] = { 2 };
    char rel[128], path[512], expect[600];
    size_t i;

    for (i = 0; i < N_FIXTURES; i++) {
        snprintf(rel, sizeof rel, "paddle/%s", fixtures[i]);
        snprintf(path, sizeof path, "%s", ckpt_test_data(rel));
        snprintf(expect, sizeof expect, "load('%s')", path);
        round_trip(path, expect, strstr(fixtures[i], "_p2") ? p2 : p4, 1);
    }
}

CKPT_TEST(test_pdparams_writes_a_plain_dict_without_metadata)
{
    ckpt_ckpt *in;

    PY("save(model(), 'in.pdparams', 4)\n");
    ASSERT_OK(open_pd(&in, "in.pdparams"));
    /* Dropping unknown objects drops the value tree: the writer gets tensors only. */
    ASSERT_OK(convert(in, "flat.pdparams", 4, CKPT_UNKNOWN_DROP));
    ckpt_close(in);
    PY("m = model()\n"
       "want = {k: v for k, v in m.items() if isinstance(v, np.ndarray)}\n"
       "want['nested/inner'] = m['nested']['inner']\n"
       "got = load('flat.pdparams')\n"
       "assert type(got) is dict and set(got) == set(want), sorted(got)\n"
       "assert all(same(want[k], got[k], k) for k in want)\n");
}

CKPT_TEST(test_pdparams_refuses_what_paddle_cannot_hold)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    struct stat st;
    ckpt_ckpt *in;

    PY("save({'w': np.ones(4, dtype='f4')}, 'in.pdparams')\n");
    ASSERT_OK(open_pd(&in, "in.pdparams"));
    o.dtype = CKPT_DTYPE_F8_E4M3FN;
    ASSERT_FAILS(CKPT_EUNSUPPORTED, ckpt_convert(in, "fp8.pdparams", &o, NULL));
    ASSERT_ERROR_MENTIONS("--dtype");
    ASSERT_ERROR_MENTIONS("(w)");
    ASSERT_TRUE(stat("fp8.pdparams", &st) != 0);
    ASSERT_FAILS(CKPT_EINVALID, convert(in, "p5.pdparams", 5, CKPT_UNKNOWN_REFUSE));
    ASSERT_ERROR_MENTIONS("protocol 2, 3 or 4");
    ASSERT_FAILS(CKPT_EINVALID, convert(in, "p1.pdparams", 1, CKPT_UNKNOWN_REFUSE));
    ckpt_close(in);
}

/* A real uint16 tensor (from safetensors) is written as paddle writes bfloat16: say so. */
CKPT_TEST(test_pdparams_notes_uint16_output)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_convert_report report;
    ckpt_ckpt *in;
    int noted;

    PY("import struct\n"
       "data = np.array([1, 2, 65535], dtype='<u2').tobytes()\n"
       "hdr = json.dumps({'u': {'dtype': 'U16', 'shape': [3], 'data_offsets': [0, len(data)]}}).encode()\n"
       "hdr += b' ' * (-len(hdr) % 8)\n"
       "open('u16.safetensors', 'wb').write(struct.pack('<Q', len(hdr)) + hdr + data)\n");
    ASSERT_OK(ckpt_open(&in, "u16.safetensors", NULL));
    ASSERT_OK(ckpt_convert(in, "u16.pdparams", &o, &report));
    noted = report.notes.data && strstr((const char *)report.notes.data, "paddle.load reads as bfloat16") != NULL;
    ckpt_convert_report_dispose(&report);
    ckpt_close(in);
    ASSERT_TRUE(noted);
    PY("assert same({'u': np.array([1, 2, 65535], dtype='u2')}, load('u16.pdparams'))\n");
}

static int decompress_zstd(const char *in_path, const char *out_path)
{
    size_t in_len, cap = ZSTD_DStreamOutSize(), rc = 1;
    unsigned char *in = ckpt_test_read_file(in_path, &in_len), *buf = malloc(cap);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    ZSTD_inBuffer ib = { in, in_len, 0 };
    FILE *f = fopen(out_path, "wb");
    int ok = in && buf && d && f && !ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, 31));

    while (ok && (ib.pos < ib.size || rc != 0)) {
        ZSTD_outBuffer ob = { buf, cap, 0 };
        rc = ZSTD_decompressStream(d, &ob, &ib);
        ok = !ZSTD_isError(rc) && fwrite(buf, 1, ob.pos, f) == ob.pos && (ob.pos || ib.pos < ib.size || rc == 0);
    }
    if (f && fclose(f) != 0)
        ok = 0;
    ZSTD_freeDCtx(d);
    free(in);
    free(buf);
    return ok;
}

/* Real paddle.save(protocol=2) output with a 2**30 + 1 byte array cut into two parts; written
 * back under protocol 2 it must be cut exactly as paddle cuts it (Python checks the bytes of
 * every part). The slowest test here: 1 GiB is paddle's smallest part. */
CKPT_TEST(test_pdparams_split_big_tensor_like_paddle)
{
    static const int64_t at[] = { 0, 7, 536870912, 1073741822, 1073741823, 1073741824 };
    static const unsigned char want[] = { 1, 8, 0x5A, 0xF3, 0xF4, 0xF5 };
    const ckpt_tensor *t;
    ckpt_ckpt *c;
    unsigned char v;
    size_t i;
    char script[2048];

    ASSERT_TRUE(decompress_zstd(ckpt_test_data("paddle/split_big.pdparams.zst"), "big.pdparams"));
    ASSERT_OK(open_pd(&c, "big.pdparams"));
    ASSERT_EQ_INT(ckpt_tensor_count(c), 2);
    t = ckpt_tensor_find(c, "big");
    /* 1024 one-MiB windows of the first part's latin-1 text, one for the second part */
    ASSERT_TRUE(shape_is(t, CKPT_DTYPE_U8, 1, 1073741825, 0) && t->storage->n_extents == 1025);
    ASSERT_TRUE(has_note(c, "reassembled big from 2 parts"));
    for (i = 0; i < sizeof at / sizeof at[0]; i++) {
        ASSERT_OK(ckpt_tensor_read(t, at[i], 1, CKPT_DTYPE_U8, &v));
        ASSERT_EQ_INT(v, want[i]);
    }
    ASSERT_OK(convert(c, "out.pdparams", 2, CKPT_UNKNOWN_REFUSE));
    ckpt_close(c);
    snprintf(script, sizeof script,
             "exp = json.load(open('%s'))\n"
             "d = load('out.pdparams')\n"
             "assert list(d) == exp['raw_keys'], list(d)\n"
             "info = {'big': {'OriginShape': (1073741825,), 'slices': ['big@@.0', 'big@@.1']}}\n"
             "assert d['UnpackBigParamInfor@@'] == info, d['UnpackBigParamInfor@@']\n"
             "for a in exp['raw_arrays']:\n"
             "    x = d[a['name']]\n"
             "    assert x.dtype.str == a['numpy_dtype'] and list(x.shape) == a['shape'], a['name']\n"
             "    assert hashlib.sha256(x.tobytes()).hexdigest() == a['sha256'], a['name']\n",
             ckpt_test_data("paddle/expected/split_big.json"));
    PY(script);
}
