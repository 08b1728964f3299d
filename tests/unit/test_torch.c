/* The torch.save format module against real torch: fixtures are written by torch itself
 * (tests/unit/torch_fixtures.py, run with the Python that has torch), read back through
 * ckpt_open and compared with what torch says each tensor holds; converted files are loaded
 * by real torch.load and compared value by value. A missing torch fails the tests. */
#include "test.h"

#include <ckpt/sys/zip.h>

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define MAX_FIELDS 8

/* Helpers report through ckpt_test_fail and return -1, so the caller's ASSERT stops the case. */
#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            ckpt_test_fail(__FILE__, __LINE__, __VA_ARGS__);                   \
            return -1;                                                         \
        }                                                                      \
    } while (0)

static const char *torch_python(void)
{
    const char *p = getenv("CKPT_TORCH_PYTHON");
    return p && *p ? p : "/usr/bin/python3";
}

/* Run the fixture script with the given arguments; its exit status. */
static int fixtures(const char *fmt, ...) CKPT_FORMAT_PRINTF(1, 2);
static int fixtures(const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    int status;

    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "\"%s\" \"%s\" %s", torch_python(), ckpt_test_data("../tests/unit/torch_fixtures.py"),
             args);
    status = system(cmd);
    if (status == -1 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/* Importing torch takes seconds, so every fixture is written once per run, in one call,
 * into a directory that lives as long as the process. */
static char fixture_dir[256];
static int fixture_state; /* 0 not yet, 1 ready, -1 failed */

static void remove_fixture_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fixture_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", fixture_dir);
}

static int fixtures_ready(void)
{
    const char *tmp = getenv("TMPDIR");

    if (fixture_state == 0) {
        snprintf(fixture_dir, sizeof fixture_dir, "%s/ckpt-torch-fixtures-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
        fixture_state = -1;
        if (mkdtemp(fixture_dir)) {
            atexit(remove_fixture_dir);
            if (fixtures("make-all '%s'", fixture_dir) == 0)
                fixture_state = 1;
        }
    }
    return fixture_state;
}

static int copy_file(const char *from, const char *to)
{
    size_t len;
    unsigned char *data = ckpt_test_read_file(from, &len);

    if (!data)
        return -1;
    ckpt_test_write_file(to, data, len);
    free(data);
    return 0;
}

/* Copy fixture `name` (name.pt and, when there is one, name.expect) into the case's directory. */
static int use_fixture(const char *name)
{
    char from[512], to[128];

    EXPECT(fixtures_ready() == 1, "writing the torch fixtures failed (is torch installed for %s?)", torch_python());
    snprintf(from, sizeof from, "%s/%s.pt", fixture_dir, name);
    snprintf(to, sizeof to, "%s.pt", name);
    EXPECT(copy_file(from, to) == 0, "no fixture %s", from);
    snprintf(from, sizeof from, "%s/%s.expect", fixture_dir, name);
    snprintf(to, sizeof to, "%s.expect", name);
    copy_file(from, to);
    return 0;
}

static int open_file(ckpt_ckpt **c, const char *path, int verify_crc)
{
    ckpt_open_options o = CKPT_OPEN_OPTIONS_INIT;
    o.verify_crc = verify_crc;
    return ckpt_open(c, path, &o);
}

static int convert_to(const ckpt_ckpt *c, const char *out, int protocol)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_convert_report report;
    int rc;

    o.protocol = protocol;
    rc = ckpt_convert(c, out, &o, &report);
    if (rc >= 0)
        ckpt_convert_report_dispose(&report);
    return rc;
}

static int parse_list(const char *s, int64_t *v, int *n)
{
    *n = 0;
    if (strcmp(s, "-") == 0)
        return 0;
    for (;;) {
        char *end;
        if (*n == CKPT_MAX_DIMS)
            return -1;
        v[(*n)++] = strtoll(s, &end, 10);
        if (*end != ',')
            return *end ? -1 : 0;
        s = end + 1;
    }
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One expectation line: name dtype shape stride offset flags group hex. */
static int check_tensor(const ckpt_ckpt *c, char **f, const ckpt_storage **groups, size_t n_groups)
{
    const ckpt_tensor *t = ckpt_tensor_find(c, f[0]);
    int64_t shape[CKPT_MAX_DIMS], stride[CKPT_MAX_DIMS];
    uint32_t flags = 0;
    size_t nbytes, i, hexlen = strcmp(f[7], "-") == 0 ? 0 : strlen(f[7]);
    unsigned char *data;
    long group = strtol(f[6], NULL, 10);
    int ndim, nstride, d, same;

    EXPECT(t, "no tensor named '%s'", f[0]);
    EXPECT(strcmp(ckpt_dtype_name(t->dtype), f[1]) == 0, "%s: dtype %s, expected %s", f[0],
           ckpt_dtype_name(t->dtype), f[1]);
    EXPECT(parse_list(f[2], shape, &ndim) == 0 && parse_list(f[3], stride, &nstride) == 0, "bad expect line");
    EXPECT(t->ndim == ndim && ndim == nstride, "%s: ndim %d, expected %d", f[0], t->ndim, ndim);
    for (d = 0; d < ndim; d++)
        EXPECT(t->shape[d] == shape[d] && t->stride[d] == stride[d], "%s: dim %d is %lld/%lld, expected %lld/%lld",
               f[0], d, (long long)t->shape[d], (long long)t->stride[d], (long long)shape[d], (long long)stride[d]);
    EXPECT(t->offset == strtoll(f[4], NULL, 10), "%s: offset %lld, expected %s", f[0], (long long)t->offset, f[4]);
    if (strchr(f[5], 'p'))
        flags |= CKPT_TENSOR_PARAMETER;
    if (strchr(f[5], 'g'))
        flags |= CKPT_TENSOR_REQUIRES_GRAD;
    EXPECT(t->flags == flags, "%s: flags %u, expected %u", f[0], (unsigned)t->flags, (unsigned)flags);
    if (group >= 0) {
        EXPECT((size_t)group < n_groups, "too many storage groups");
        if (!groups[group])
            groups[group] = t->storage;
        EXPECT(groups[group] == t->storage, "%s: should share storage group %ld", f[0], group);
        for (i = 0, same = 0; i < n_groups; i++)
            same += groups[i] == t->storage;
        EXPECT(same == 1, "%s: shares a storage with another group", f[0]);
    }
    nbytes = (size_t)ckpt_tensor_nbytes(t);
    EXPECT(nbytes * 2 == hexlen, "%s: %zu bytes, expected %zu", f[0], nbytes, hexlen / 2);
    data = malloc(nbytes + 1);
    EXPECT(data, "out of memory");
    if (ckpt_tensor_read(t, 0, ckpt_tensor_numel(t), t->dtype, data) < 0) {
        free(data);
        EXPECT(0, "%s: read failed: %s", f[0], ckpt_error_last()->message);
    }
    for (i = 0; i < nbytes; i++) {
        int byte = hex_value(f[7][2 * i]) * 16 + hex_value(f[7][2 * i + 1]);
        if (data[i] != byte) {
            ckpt_test_fail(__FILE__, __LINE__, "%s: byte %zu is %02x, expected %02x", f[0], i, data[i], byte);
            break;
        }
    }
    free(data);
    return i == nbytes ? 0 : -1;
}

/* Every tensor the expectation file lists, and no others. */
static int check_expect(const ckpt_ckpt *c, const char *path)
{
    const ckpt_storage *groups[64] = { NULL };
    size_t len, lines = 0;
    char *text = (char *)ckpt_test_read_file(path, &len), *line, *save = NULL;
    int rc = 0;

    EXPECT(text, "cannot read %s", path);
    text[len] = '\0';
    for (line = strtok_r(text, "\n", &save); line && rc == 0; line = strtok_r(NULL, "\n", &save)) {
        char *f[MAX_FIELDS], *fsave = NULL;
        int n = 0;
        for (f[n] = strtok_r(line, "\t", &fsave); f[n] && n < MAX_FIELDS - 1;)
            f[++n] = strtok_r(NULL, "\t", &fsave);
        if (n != MAX_FIELDS - 1 || !f[n]) {
            free(text);
            EXPECT(0, "bad line in %s", path);
        }
        rc = check_tensor(c, f, groups, sizeof groups / sizeof groups[0]);
        lines++;
    }
    free(text);
    if (rc < 0)
        return rc;
    EXPECT(ckpt_tensor_count(c) == lines, "%zu tensors, expected %zu", ckpt_tensor_count(c), lines);
    return 0;
}

/* Open, check the tensors, close. */
static int open_and_check(const char *path, const char *expect)
{
    ckpt_ckpt *c = NULL;
    int rc = open_file(&c, path, 0);

    EXPECT(rc == 0, "opening %s: %s", path, ckpt_error_last()->message);
    EXPECT(strcmp(ckpt_format_name(c), "torch") == 0, "format %s", ckpt_format_name(c));
    rc = check_expect(c, expect);
    ckpt_close(c);
    return rc;
}

/* What torch.save writes: record order, 64-byte aligned data, archive named after the file. */
static int check_layout(const char *path, const char *archive)
{
    static const char *const head[] = { "data.pkl", ".format_version", ".storage_alignment", "byteorder" };
    ckpt_file *f = NULL;
    ckpt_zip *z = NULL;
    size_t i, n, keys = 0;
    char want[256];
    int rc = ckpt_file_open(&f, path);

    if (rc == 0)
        rc = ckpt_zip_open(&z, f);
    if (rc < 0) {
        ckpt_file_close(f);
        EXPECT(0, "%s: %s", path, ckpt_error_last()->message);
    }
    n = ckpt_zip_count(z);
    for (i = 0; i < n && rc == 0; i++) {
        const ckpt_zip_entry *e = ckpt_zip_entry_at(z, i);
        if (i < 4)
            snprintf(want, sizeof want, "%s/%s", archive, head[i]);
        else if (i + 1 < n)
            snprintf(want, sizeof want, "%s/data/%zu", archive, keys++);
        else
            snprintf(want, sizeof want, "%s/version", archive);
        if (strcmp(e->name, want) != 0 || e->data_offset % 64 != 0 || e->method != 0) {
            ckpt_test_fail(__FILE__, __LINE__, "entry %zu: %s at %llu, expected %s 64-byte aligned", i, e->name,
                           (unsigned long long)e->data_offset, want);
            rc = -1;
        }
    }
    ckpt_zip_close(z);
    ckpt_file_close(f);
    return rc;
}

/* ---- reading ------------------------------------------------------------------------ */

CKPT_TEST(test_torch_every_dtype)
{
    ASSERT_OK(use_fixture("dtypes"));
    ASSERT_OK(open_and_check("dtypes.pt", "dtypes.expect"));
}

CKPT_TEST(test_torch_views_parameters_and_tree)
{
    const ckpt_value *root, *base, *again, *iteration, *pair, *src;
    const ckpt_tensor *weight;
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("views"));
    ASSERT_OK(open_and_check("views.pt", "views.expect"));
    ASSERT_OK(open_file(&c, "views.pt", 1));
    root = ckpt_root(c);
    ASSERT_TRUE(root && root->kind == CKPT_VAL_DICT);
    ASSERT_TRUE(ckpt_value_is_global(root->u.dict.cls, "collections", "OrderedDict"));
    /* one tensor object saved under two keys is one memo-shared node, one tensor */
    base = ckpt_value_dict_get(root, "base");
    again = ckpt_value_dict_get(root, "again");
    ASSERT_TRUE(base && base == again && base->kind == CKPT_VAL_TENSOR);
    ASSERT_EQ_STR(ckpt_tensor_at(c, base->u.tensor.index)->name, "base");
    iteration = ckpt_value_dict_get(root, "iteration");
    ASSERT_TRUE(iteration && iteration->kind == CKPT_VAL_INT && iteration->u.integer == 12);
    pair = ckpt_value_dict_get(root, "pair");
    ASSERT_TRUE(pair && pair->kind == CKPT_VAL_TUPLE && pair->u.seq.n == 3);
    ASSERT_TRUE(pair->u.seq.items[0]->kind == CKPT_VAL_TENSOR && ckpt_value_is_str(pair->u.seq.items[2], "text"));
    /* the construction stays available for inspection */
    src = ckpt_value_dict_get(root, "weight")->u.tensor.source;
    ASSERT_TRUE(src && src->kind == CKPT_VAL_OBJECT);
    ASSERT_TRUE(ckpt_value_is_global(src->u.obj.callable, "torch._utils", "_rebuild_parameter"));
    weight = ckpt_tensor_find(c, "weight");
    ASSERT_TRUE(weight && weight->storage && weight->storage->n_extents == 1);
    ASSERT_EQ_INT(weight->storage->extents[0].offset % 64, 0);
    ckpt_close(c);
}

CKPT_TEST(test_torch_protocol_4)
{
    ASSERT_OK(use_fixture("proto4"));
    ASSERT_OK(open_and_check("proto4.pt", "proto4.expect"));
}

CKPT_TEST(test_torch_legacy_format)
{
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("legacy"));
    ASSERT_OK(open_and_check("legacy.pt", "legacy.expect"));
    ASSERT_OK(use_fixture("legacy_dtypes"));
    ASSERT_OK(open_and_check("legacy_dtypes.pt", "legacy_dtypes.expect"));
    ASSERT_OK(open_file(&c, "legacy.pt", 0));
    ASSERT_TRUE(ckpt_note_count(c) >= 1 && strstr(ckpt_note_at(c, 0), "legacy"));
    ckpt_close(c);
}

CKPT_TEST(test_torch_megatron_checkpoint)
{
    const ckpt_value *root, *args, *model, *extra, *fc1, *version;
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("megatron"));
    ASSERT_OK(open_and_check("megatron.pt", "megatron.expect"));
    ASSERT_OK(open_file(&c, "megatron.pt", 0));
    root = ckpt_root(c);
    args = ckpt_value_dict_get(root, "args");
    ASSERT_TRUE(args && args->kind == CKPT_VAL_OBJECT && args->u.obj.state);
    ASSERT_TRUE(ckpt_value_is_global(args->u.obj.callable, "argparse", "Namespace"));
    version = ckpt_value_dict_get(root, "checkpoint_version");
    ASSERT_TRUE(version && version->kind == CKPT_VAL_FLOAT && version->u.real == 3.0);
    model = ckpt_value_dict_get(root, "model");
    ASSERT_TRUE(model && model->kind == CKPT_VAL_DICT);
    /* TE < 2.0 extra state: a BytesIO object, left as it is */
    extra = ckpt_value_dict_get(model, "decoder.layers.0.self_attention.linear_qkv._extra_state");
    ASSERT_TRUE(extra && extra->kind == CKPT_VAL_OBJECT);
    /* TE >= 2.0 extra state: an empty uint8 tensor */
    fc1 = ckpt_value_dict_get(model, "decoder.layers.0.mlp.linear_fc1._extra_state");
    ASSERT_TRUE(fc1 && fc1->kind == CKPT_VAL_TENSOR);
    ASSERT_EQ_INT(ckpt_tensor_numel(ckpt_tensor_at(c, fc1->u.tensor.index)), 0);
    ckpt_close(c);
}

CKPT_TEST(test_torch_v3_dtypes)
{
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("v3"));
    ASSERT_OK(open_and_check("v3.pt", "v3.expect"));
    ASSERT_OK(use_fixture("complex32"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_file(&c, "complex32.pt", 0));
    ASSERT_ERROR_MENTIONS("complex32.pt");
    ASSERT_ERROR_MENTIONS("torch.complex32");
}

CKPT_TEST(test_torch_deflated_and_big_endian_records)
{
    ASSERT_OK(use_fixture("float32"));
    ASSERT_OK(use_fixture("deflate"));
    ASSERT_OK(open_and_check("deflate.pt", "float32.expect"));
    ASSERT_OK(use_fixture("bigendian"));
    ASSERT_OK(open_and_check("bigendian.pt", "float32.expect"));
}

/* ---- refusing ----------------------------------------------------------------------- */

CKPT_TEST(test_torch_torchscript_refused)
{
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("torchscript"));
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_file(&c, "torchscript.pt", 0));
    ASSERT_ERROR_MENTIONS("torchscript.pt");
    ASSERT_ERROR_MENTIONS("TorchScript");
}

CKPT_TEST(test_torch_older_containers_refused)
{
    unsigned char tar[1024];
    ckpt_ckpt *c = NULL;

    ckpt_test_write_file("preview.pt", "PYTORCH1\0\0\0\0\0\0\0\0", 16);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_file(&c, "preview.pt", 0));
    ASSERT_ERROR_MENTIONS("preview.pt");
    ASSERT_ERROR_MENTIONS("preview release");

    /* torch 0.3 and older: a tar whose first member is sys_info */
    memset(tar, 0, sizeof tar);
    memcpy(tar, "sys_info", 8);
    memcpy(tar + 257, "ustar", 5);
    ckpt_test_write_file("old.tar.pt", tar, sizeof tar);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_file(&c, "old.tar.pt", 0));
    ASSERT_ERROR_MENTIONS("old.tar.pt");
    ASSERT_ERROR_MENTIONS("tar-based");
}

CKPT_TEST(test_torch_code_in_pickle_is_never_run)
{
    ckpt_ckpt *c = NULL;
    struct stat st;
    size_t i;
    int unknown = 0;

    ASSERT_OK(use_fixture("evil"));
    ASSERT_OK(open_file(&c, "evil.pt", 0));
    for (i = 0; i < ckpt_global_count(c); i++) {
        const ckpt_global_ref *g = ckpt_global_at(c, i);
        if (strcmp(g->name, "system") == 0 && !g->known)
            unknown = 1;
    }
    ASSERT_TRUE(unknown);
    ASSERT_FAILS(CKPT_EUNSAFE, convert_to(c, "out.pt", 0));
    ASSERT_ERROR_MENTIONS("system");
    ckpt_close(c);
    ASSERT_TRUE(stat("pwned", &st) != 0);
    ASSERT_TRUE(stat("out.pt", &st) != 0);
}

CKPT_TEST(test_torch_corrupt_inputs)
{
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("short"));
    ASSERT_FAILS(CKPT_EFORMAT, open_file(&c, "short.pt", 0));
    ASSERT_ERROR_MENTIONS("short.pt");
    ASSERT_ERROR_MENTIONS("data/0 holds 116 bytes, expected 120 (15 x float64)");
    ASSERT_ERROR_MENTIONS("(float64)");

    ASSERT_OK(use_fixture("badtype"));
    ASSERT_FAILS(CKPT_EFORMAT, open_file(&c, "badtype.pt", 0));
    ASSERT_ERROR_MENTIONS("badtype.pt");
    ASSERT_ERROR_MENTIONS("unknown storage type torch.FlaotStorage");

    ASSERT_OK(use_fixture("badversion"));
    ASSERT_FAILS(CKPT_EFORMAT, open_file(&c, "badversion.pt", 0));
    ASSERT_ERROR_MENTIONS("version");

    ASSERT_OK(use_fixture("missing"));
    ASSERT_FAILS(CKPT_EFORMAT, open_file(&c, "missing.pt", 0));
    ASSERT_ERROR_MENTIONS("data/1 is missing (float32)");

    ASSERT_OK(use_fixture("offset"));
    ASSERT_FAILS(CKPT_EFORMAT, open_file(&c, "offset.pt", 0));
    ASSERT_ERROR_MENTIONS("offset.pt");
    ASSERT_ERROR_MENTIONS("(bad)");
}

CKPT_TEST(test_torch_truncated_files)
{
    unsigned char *data;
    ckpt_ckpt *c = NULL;
    size_t len;

    ASSERT_OK(use_fixture("views"));
    data = ckpt_test_read_file("views.pt", &len);
    ASSERT_TRUE(data);
    ckpt_test_write_file("cut.pt", data, len / 2);
    free(data);
    ASSERT_TRUE(open_file(&c, "cut.pt", 0) < 0);
    ASSERT_ERROR_MENTIONS("cut.pt");

    ASSERT_OK(use_fixture("legacy"));
    data = ckpt_test_read_file("legacy.pt", &len);
    ASSERT_TRUE(data);
    ckpt_test_write_file("cut_legacy.pt", data, len - 10);
    free(data);
    ASSERT_FAILS(CKPT_EFORMAT, open_file(&c, "cut_legacy.pt", 0));
    ASSERT_ERROR_MENTIONS("cut_legacy.pt");
    ASSERT_ERROR_MENTIONS("truncated");
}

CKPT_TEST(test_torch_crc_verified_on_request)
{
    const ckpt_tensor *t;
    unsigned char *data;
    ckpt_ckpt *c = NULL;
    uint64_t at;
    size_t len;

    ASSERT_OK(use_fixture("float32"));
    ASSERT_OK(open_file(&c, "float32.pt", 1));
    t = ckpt_tensor_find(c, "a");
    ASSERT_TRUE(t && t->storage);
    at = t->storage->extents[0].offset;
    ckpt_close(c);
    data = ckpt_test_read_file("float32.pt", &len);
    ASSERT_TRUE(data && at < len);
    data[at] ^= 0x40;
    ckpt_test_write_file("flipped.pt", data, len);
    free(data);
    ASSERT_OK(open_file(&c, "flipped.pt", 0));
    ckpt_close(c);
    ASSERT_TRUE(open_file(&c, "flipped.pt", 1) < 0);
    ASSERT_ERROR_MENTIONS("flipped.pt");
}

/* ---- writing ------------------------------------------------------------------------ */

CKPT_TEST(test_torch_write_round_trip)
{
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("views"));
    ASSERT_OK(open_file(&c, "views.pt", 0));
    ASSERT_OK(convert_to(c, "model_optim_rng.pt", 0));
    ckpt_close(c);
    ASSERT_OK(check_layout("model_optim_rng.pt", "model_optim_rng"));
    ASSERT_OK(open_and_check("model_optim_rng.pt", "views.expect"));

    /* protocol 4 on request; torch 1.13's weights_only unpickler knows protocol 2 only */
    ASSERT_OK(use_fixture("dtypes"));
    ASSERT_OK(open_file(&c, "dtypes.pt", 0));
    ASSERT_OK(convert_to(c, "dtypes_out.pth", 4));
    ckpt_close(c);
    ASSERT_EQ_INT(fixtures("compare views.pt,model_optim_rng.pt views.pt,model_optim_rng.pt,wo "
                           "dtypes.pt,dtypes_out.pth"), 0);
}

CKPT_TEST(test_torch_write_megatron_and_legacy)
{
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("megatron"));
    ASSERT_OK(open_file(&c, "megatron.pt", 0));
    ASSERT_OK(convert_to(c, "out.pt", 0));
    ckpt_close(c);
    ASSERT_OK(check_layout("out.pt", "out"));
    ASSERT_OK(open_and_check("out.pt", "megatron.expect"));

    ASSERT_OK(use_fixture("legacy"));
    ASSERT_OK(open_file(&c, "legacy.pt", 0));
    ASSERT_OK(convert_to(c, "from_legacy.pt", 0));
    ckpt_close(c);
    ASSERT_EQ_INT(fixtures("compare megatron.pt,out.pt legacy.pt,from_legacy.pt,wo"), 0);
}

/* An input format without a value tree: the output is an OrderedDict of name -> tensor. */
CKPT_TEST(test_torch_write_from_flat_input)
{
    static const char header[] = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                                 "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}}";
    unsigned char file[256];
    size_t hlen = (sizeof header - 1 + 7) / 8 * 8, i;
    const ckpt_value *root;
    const ckpt_tensor *w;
    uint16_t vals[4];
    ckpt_ckpt *c = NULL;

    memset(file, ' ', sizeof file);
    for (i = 0; i < 8; i++)
        file[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(file + 8, header, sizeof header - 1);
    for (i = 0; i < 16; i++)
        file[8 + hlen + i] = (unsigned char)(i + 1);
    ckpt_test_write_file("flat.safetensors", file, 8 + hlen + 16);
    ASSERT_OK(open_file(&c, "flat.safetensors", 0));
    ASSERT_OK(convert_to(c, "flat.pt", 0));
    ckpt_close(c);
    ASSERT_OK(check_layout("flat.pt", "flat"));
    ASSERT_OK(open_file(&c, "flat.pt", 0));
    root = ckpt_root(c);
    ASSERT_TRUE(root && root->kind == CKPT_VAL_DICT && root->u.dict.map.n == 2);
    ASSERT_TRUE(ckpt_value_is_global(root->u.dict.cls, "collections", "OrderedDict"));
    w = ckpt_tensor_find(c, "w");
    ASSERT_TRUE(w && w->dtype == CKPT_DTYPE_BF16 && w->ndim == 2 && ckpt_tensor_find(c, "b"));
    ASSERT_OK(ckpt_tensor_read(w, 0, 4, CKPT_DTYPE_BF16, vals));
    ASSERT_EQ_INT(vals[0], 0x0201);
    ASSERT_EQ_INT(vals[3], 0x0807);
    ckpt_close(c);
    ASSERT_EQ_INT(fixtures("compare flat.pt,flat.pt,wo"), 0);
}

CKPT_TEST(test_torch_write_v3_dtypes)
{
    ckpt_ckpt *c = NULL;

    ASSERT_OK(use_fixture("v3"));
    ASSERT_OK(open_file(&c, "v3.pt", 0));
    ASSERT_OK(convert_to(c, "v3_out.pt", 0));
    ckpt_close(c);
    ASSERT_OK(check_layout("v3_out.pt", "v3_out"));
    ASSERT_OK(open_and_check("v3_out.pt", "v3.expect"));
}
