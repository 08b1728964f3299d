/* The HDF5 walk's child process and its records (formats/hdf5_walk_ipc.c, hdf5_build.c): a
 * child that crashes, hangs or exits badly is an error naming the file as corrupt; records
 * that are cut short, count more than they hold or point outside the file are refused
 * before anything is allocated for them. The child here sends scripted records instead of
 * walking the file (any HDF5 file, so that the format bids). */
#include "test.h"

#define CKPT_BUILD
#include "../../formats/hdf5_private.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE CKPT_TESTDATA_DIR "/hdf5/compact.h5"

/* ---- scripts ---- */

static unsigned char script[4096];
static size_t script_len;

static void s_reset(void)
{
    script_len = 0;
}

static void s_le(uint64_t v, size_t n)
{
    size_t i;

    for (i = 0; i < n && script_len < sizeof script; i++)
        script[script_len++] = (unsigned char)(v >> (8 * i));
}

static void s_u8(unsigned v)
{
    s_le(v, 1);
}

static void s_u32(uint32_t v)
{
    s_le(v, 4);
}

static void s_u64(uint64_t v)
{
    s_le(v, 8);
}

static void s_str(const char *s)
{
    size_t n = strlen(s);

    s_u32((uint32_t)n);
    if (script_len + n <= sizeof script) {
        memcpy(script + script_len, s, n);
        script_len += n;
    }
}

/* The head of a DATASET record of float32 elements. */
static void s_dataset(const char *key, int ndim, const uint64_t *dims, unsigned layout)
{
    int d;

    s_u8(CKPT_H5R_DATASET);
    s_str(key);
    s_u32(CKPT_DTYPE_F32);
    s_u8(0);
    s_u8((unsigned)ndim);
    for (d = 0; d < ndim; d++)
        s_u64(dims[d]);
    s_u8(layout);
}

/* ---- children ---- */

static size_t send_len;

static void send_script(const char *path, const ckpt_file *file, ckpt_h5_out *o)
{
    (void)path;
    (void)file;
    memcpy(o->buf, script, send_len);
    o->len = send_len;
}

static void crash(const char *path, const ckpt_file *file, ckpt_h5_out *o)
{
    (void)path;
    (void)file;
    (void)o;
    raise(SIGSEGV);
}

static void hang(const char *path, const ckpt_file *file, ckpt_h5_out *o)
{
    (void)path;
    (void)file;
    (void)o;
    for (;;)
        pause();
}

static void fail_exit(const char *path, const ckpt_file *file, ckpt_h5_out *o)
{
    (void)path;
    (void)file;
    (void)o;
    _exit(7);
}

/* Open the fixture with the child sending the first n bytes of the script. */
static int open_script(size_t n, ckpt_ckpt **c)
{
    int rc;

    send_len = n;
    ckpt_hdf5__set_walk(send_script, 5);
    rc = ckpt_open(c, FIXTURE, NULL);
    ckpt_hdf5__set_walk(NULL, 0);
    return rc;
}

static int open_with(ckpt_h5_walk_fn fn, unsigned limit_s, ckpt_ckpt **c)
{
    int rc;

    ckpt_hdf5__set_walk(fn, limit_s);
    rc = ckpt_open(c, FIXTURE, NULL);
    ckpt_hdf5__set_walk(NULL, 0);
    return rc;
}

/* ---- tests ---- */

/* A group with an attribute, a compact dataset in it, a string dataset at the root. */
static void good_script(void)
{
    static const uint64_t two[1] = { 2 };
    const float values[2] = { 1.0f, 2.5f };
    uint32_t bits;
    int i;

    s_reset();
    s_u8(CKPT_H5R_NOTE);
    s_str("a note");
    s_u8(CKPT_H5R_GROUP);
    s_str("g");
    s_u8(CKPT_H5R_ATTR);
    s_str("g");
    s_str("a");
    s_u8(CKPT_H5V_LIST);
    s_u32(2);
    s_u8(CKPT_H5V_INT);
    s_u64(5);
    s_u8(CKPT_H5V_STR);
    s_str("five");
    s_dataset("x", 1, two, CKPT_H5L_COMPACT);
    s_u32(8);
    for (i = 0; i < 2; i++) {
        memcpy(&bits, &values[i], 4);
        s_u32(bits);
    }
    s_u8(CKPT_H5R_END);
    s_u8(CKPT_H5R_VALUE);
    s_str("s");
    s_u8(CKPT_H5V_STR);
    s_str("hi");
    s_u8(CKPT_H5R_DONE);
}

CKPT_TEST(test_hdf5_walk_records_build)
{
    ckpt_ckpt *c = NULL;
    const ckpt_tensor *t;
    const ckpt_value *attrs;
    float got[2];

    good_script();
    ASSERT_OK(open_script(script_len, &c));
    ASSERT_EQ_INT(1, (long long)ckpt_tensor_count(c));
    t = ckpt_tensor_at(c, 0);
    ASSERT_EQ_STR("g/x", t->name);
    ASSERT_OK(ckpt_tensor_read(t, 0, 2, CKPT_DTYPE_F32, got));
    ASSERT_TRUE(got[0] == 1.0f && got[1] == 2.5f);
    ASSERT_TRUE(ckpt_value_is_str(ckpt_value_dict_get(ckpt_root(c), "s"), "hi"));
    attrs = ckpt_value_dict_get(ckpt_value_dict_get(ckpt_root(c), "__attributes__"), "g");
    ASSERT_TRUE(attrs && ckpt_value_dict_get(attrs, "a"));
    ckpt_close(c);
}

/* Every prefix of a good stream is refused as a corrupt file, naming it. */
CKPT_TEST(test_hdf5_walk_records_cut_short)
{
    ckpt_ckpt *c = NULL;
    size_t n, full;

    good_script();
    full = script_len;
    for (n = 0; n < full; n++) {
        ASSERT_FAILS(CKPT_EFORMAT, open_script(n, &c));
        ASSERT_ERROR_MENTIONS("compact.h5: corrupt HDF5 file");
    }
}

/* Counts and sizes beyond what is left, or beyond the file, are refused before use. */
CKPT_TEST(test_hdf5_walk_records_bounds)
{
    static const uint64_t huge[1] = { (uint64_t)1 << 40 }, eight[1] = { 8 }, wide[2] = { (uint64_t)1 << 62, 16 };
    ckpt_ckpt *c = NULL;

    /* a list of 4 billion items in a few bytes */
    s_reset();
    s_u8(CKPT_H5R_ATTR);
    s_str("/");
    s_str("a");
    s_u8(CKPT_H5V_LIST);
    s_u32(0xffffffffu);
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));
    ASSERT_ERROR_MENTIONS("corrupt HDF5 file");

    /* a string longer than the stream */
    s_reset();
    s_u8(CKPT_H5R_NOTE);
    s_u32(0x7fffffffu);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));

    /* 2^40 chunks of one element: refused before any tile is made */
    s_reset();
    s_dataset("x", 1, huge, CKPT_H5L_CHUNKED);
    s_u64(1);
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_script(script_len, &c));
    ASSERT_ERROR_MENTIONS("'x'");

    /* a run of unwritten chunks past the grid of 2 */
    s_reset();
    s_dataset("x", 1, eight, CKPT_H5L_CHUNKED);
    s_u64(4);
    s_u8(0);
    s_u8(CKPT_H5F_ZERO);
    s_u8(CKPT_H5C_FILL);
    s_u64(3);
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));

    /* a chunk past the end of the file */
    s_reset();
    s_dataset("x", 1, eight, CKPT_H5L_CHUNKED);
    s_u64(8);
    s_u8(0);
    s_u8(CKPT_H5F_ZERO);
    s_u8(CKPT_H5C_STORED);
    s_u64((uint64_t)1 << 40);
    s_u64(32);
    s_u32(0);
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));
    ASSERT_ERROR_MENTIONS("past the end of the file");

    /* a contiguous dataset whose size overflows */
    s_reset();
    s_dataset("x", 2, wide, CKPT_H5L_CONTIGUOUS);
    s_u8(1);
    s_u64(0);
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));
    ASSERT_ERROR_MENTIONS("too large");

    /* compact bytes that are not its dataset's size */
    s_reset();
    s_dataset("x", 1, eight, CKPT_H5L_COMPACT);
    s_str("four");
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));

    /* a type that is none of ours */
    s_reset();
    s_u8(CKPT_H5R_DATASET);
    s_str("x");
    s_u32(9999);
    s_u8(0);
    s_u8(0);
    s_u8(CKPT_H5L_COMPACT);
    s_u32(0);
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));
}

/* Groups must nest, the stream must end where the walk does, a failure is the error. */
CKPT_TEST(test_hdf5_walk_records_structure)
{
    static const uint64_t eight[1] = { 8 };
    ckpt_ckpt *c = NULL;

    s_reset();
    s_u8(CKPT_H5R_END);
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));

    s_reset();
    s_u8(CKPT_H5R_GROUP);
    s_str("g");
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));

    s_reset();
    s_u8(CKPT_H5R_DONE);
    s_u8(CKPT_H5R_NOTE);
    s_str("late");
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));

    s_reset();
    s_u8(CKPT_H5R_GROUP);
    s_u32(3);
    s_u8('a');
    s_u8(0);
    s_u8('b');
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));
    ASSERT_ERROR_MENTIONS("NUL");

    s_reset();
    s_u8(CKPT_H5R_FAIL);
    s_u32((uint32_t)-CKPT_EUNSUPPORTED);
    s_u32(CKPT_ERRCLASS_FORMAT);
    s_str("compact.h5: the reason");
    ASSERT_FAILS(CKPT_EUNSUPPORTED, open_script(script_len, &c));
    ASSERT_ERROR_MENTIONS("the reason");

    /* a walk that stopped in the middle of a dataset's chunks must say why, and stop */
    s_reset();
    s_dataset("x", 1, eight, CKPT_H5L_CHUNKED);
    s_u64(4);
    s_u8(0);
    s_u8(CKPT_H5F_ZERO);
    s_u8(CKPT_H5C_ABORT);
    s_u8(CKPT_H5R_DONE);
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));
    script_len--;
    s_u8(CKPT_H5R_FAIL);
    s_u32((uint32_t)-CKPT_EFORMAT);
    s_u32(CKPT_ERRCLASS_FORMAT);
    s_str("compact.h5: a chunk is not where HDF5 says it is");
    ASSERT_FAILS(CKPT_EFORMAT, open_script(script_len, &c));
    ASSERT_ERROR_MENTIONS("not where HDF5 says");
}

/* A child that crashes, hangs or fails: an error naming the file as corrupt, and why. */
CKPT_TEST(test_hdf5_walk_child_ends)
{
    ckpt_ckpt *c = NULL;

    ASSERT_FAILS(CKPT_EFORMAT, open_with(crash, 0, &c));
    ASSERT_ERROR_MENTIONS("compact.h5: corrupt HDF5 file (the HDF5 library crashed while reading its metadata: signal 11)");
    ASSERT_EQ_INT(CKPT_ERRCLASS_FORMAT, ckpt_error_last()->klass);

    ASSERT_FAILS(CKPT_EFORMAT, open_with(hang, 1, &c));
    ASSERT_ERROR_MENTIONS("made no progress reading its metadata for 1 s");

    ASSERT_FAILS(CKPT_EFORMAT, open_with(fail_exit, 0, &c));
    ASSERT_ERROR_MENTIONS("exit status 7");

    /* and the real walk still opens the file afterwards */
    ASSERT_OK(ckpt_open(&c, FIXTURE, NULL));
    ckpt_close(c);
}
