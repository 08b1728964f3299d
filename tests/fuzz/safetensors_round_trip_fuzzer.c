/* safetensors read -> write -> read. Whatever the reader accepts the writer must write,
 * and reading that back gives the same tensors (names, dtypes, shapes, bytes); writing
 * twice gives the same bytes, and so does writing what was read back. The writer's
 * __metadata__ is {"format":"pt"} whatever the input's (as the reference writer's header
 * is, tests/unit/test_safetensors.c), so that is what the file read back must hold, and
 * what the file written from it holds again.
 *
 * The input's last byte is a parameter, not part of the file: bits 0-2 pick a cast of the
 * floating-point tensors (none, f32, bf16, f16, f64, or an f8 type that bit 3 picks), bit
 * 4 the writer's working memory (the least it takes, or its default). */
#include "round_trip.h"

static ckpt_dtype pick_cast(uint8_t p)
{
    switch (p & 7) {
    case 3: return CKPT_DTYPE_F32;
    case 4: return CKPT_DTYPE_BF16;
    case 5: return CKPT_DTYPE_F16;
    case 6: return CKPT_DTYPE_F64;
    case 7: return (p & 8) ? CKPT_DTYPE_F8_E5M2 : CKPT_DTYPE_F8_E4M3FN;
    default: return CKPT_DTYPE_INVALID;
    }
}

static const ckpt_value *metadata(const ckpt_ckpt *c)
{
    return ckpt_root(c) ? ckpt_value_dict_get(ckpt_root(c), "__metadata__") : NULL;
}

static void check_written_metadata(const ckpt_ckpt *c)
{
    static const char want[] = "{s'format':s'pt',}";
    ckpt_buf text = CKPT_BUF_INIT;

    rt_dump(metadata(c), &text);
    FUZZ_ASSERT(text.len == sizeof want && memcmp(text.data, want, sizeof want) == 0);
    ckpt_buf_dispose(&text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_ckpt *in = NULL, *back, *again;
    char a[4200], b[4200], c[4200];
    uint8_t p;
    int fd;

    if (size == 0)
        return 0;
    p = data[--size];
    if (!rt_open_input(data, size, "safetensors", CKPT_EFORMAT, &fd, &in))
        return 0;
    o.format = "safetensors";
    o.dtype = pick_cast(p);
    o.memory = (p & 16) ? 0 : 1;
    o.threads = 1;
    o.overwrite = 1;
    rt_paths(a, b, c, sizeof a);

    rt_wrote_twice(rt_write(in, a, &o), in, a, b, &o);

    back = rt_open(a, "safetensors");
    rt_same_tensors(in, back, o.dtype);
    check_written_metadata(back);

    again = rt_fixed_point(back, a, c, &o, "safetensors");
    rt_same_value(metadata(back), metadata(again));
    ckpt_close(again);
    ckpt_close(back);
    ckpt_close(in);
    close(fd);
    return 0;
}
