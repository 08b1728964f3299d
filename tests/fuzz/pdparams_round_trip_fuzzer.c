/* pdparams read -> write -> read. Whatever the reader accepts the writer must write (a
 * refusal is only allowed for pickle globals outside the known set, when asked to refuse
 * them, for a protocol it does not write, and for a global name with a newline carried at
 * protocol 2, which has no way to write one), and reading that back gives the same tensors (names, dtypes, shapes, bytes) and,
 * when the value tree is carried, the same tree; writing twice gives the same bytes, and
 * so does writing what was read back.
 *
 * The input's last byte is a parameter, not part of the file: bits 0-1 pick the pickle
 * protocol (the writer's default, 2, 3 which it must refuse, 4), bits 2-3 the policy for unknown globals
 * (refuse, refuse, drop the tree, keep it), bits 4-6 a cast of the floating-point tensors
 * (none, f32, bf16, f16, f64), bit 7 the writer's working memory. */
#include "round_trip.h"

static ckpt_dtype pick_cast(uint8_t p)
{
    switch ((p >> 4) & 7) {
    case 4: return CKPT_DTYPE_F32;
    case 5: return CKPT_DTYPE_BF16;
    case 6: return CKPT_DTYPE_F16;
    case 7: return CKPT_DTYPE_F64;
    default: return CKPT_DTYPE_INVALID;
    }
}

static int has_unknown_global(const ckpt_ckpt *c)
{
    size_t i;

    for (i = 0; i < ckpt_global_count(c); i++)
        if (!ckpt_global_at(c, i)->known)
            return 1;
    return 0;
}

static int has_newline_global(const ckpt_ckpt *c)
{
    size_t i;

    for (i = 0; i < ckpt_global_count(c); i++)
        if (strchr(ckpt_global_at(c, i)->module, '\n') || strchr(ckpt_global_at(c, i)->name, '\n'))
            return 1;
    return 0;
}

/* The tree a tensors-only write gives: {name: tensor} in table order. */
static void check_flat_root(const ckpt_ckpt *in, const ckpt_ckpt *back)
{
    const ckpt_value *root = ckpt_root(back);
    size_t i;

    FUZZ_ASSERT(root && root->kind == CKPT_VAL_DICT && root->u.dict.map.n == ckpt_tensor_count(in));
    for (i = 0; i < ckpt_tensor_count(in); i++) {
        const ckpt_value *k = root->u.dict.map.keys[i], *v = root->u.dict.map.vals[i];
        FUZZ_ASSERT(ckpt_value_is_str(k, ckpt_tensor_at(in, i)->name));
        FUZZ_ASSERT(v->kind == CKPT_VAL_TENSOR && v->u.tensor.index == i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int protocols[] = { 0, 2, 3, 4 };
    static const ckpt_unknown_policy policies[] = { CKPT_UNKNOWN_REFUSE, CKPT_UNKNOWN_REFUSE, CKPT_UNKNOWN_DROP,
                                                    CKPT_UNKNOWN_KEEP };
    ckpt_convert_options o = CKPT_CONVERT_OPTIONS_INIT;
    ckpt_ckpt *in = NULL, *back, *again;
    char a[4200], b[4200], c[4200];
    uint8_t p;
    int fd, rc, unsafe, unwritable;

    if (size == 0)
        return 0;
    p = data[--size];
    if (!rt_open_input(data, size, "pdparams", CKPT_EUNSAFE, &fd, &in))
        return 0;
    o.format = "pdparams";
    o.protocol = protocols[p & 3];
    o.unknown = policies[(p >> 2) & 3];
    o.dtype = pick_cast(p);
    o.memory = (p & 128) ? 0 : 1;
    o.threads = 1;
    o.overwrite = 1;
    rt_paths(a, b, c, sizeof a);

    rc = rt_write(in, a, &o);
    unsafe = o.unknown == CKPT_UNKNOWN_REFUSE && has_unknown_global(in);
    unwritable = o.protocol == 3 || (o.protocol == 2 && o.unknown == CKPT_UNKNOWN_KEEP && has_newline_global(in));
    if (unsafe || unwritable) {
        FUZZ_ASSERT(rc == (unsafe ? CKPT_EUNSAFE : CKPT_EINVALID));
        ckpt_close(in);
        close(fd);
        return 0;
    }
    rt_wrote_twice(rc, in, a, b, &o);

    back = rt_open(a, "pdparams");
    rt_same_tensors(in, back, o.dtype);
    if (o.unknown == CKPT_UNKNOWN_DROP)
        check_flat_root(in, back);
    else
        rt_same_value(ckpt_root(in), ckpt_root(back));

    again = rt_fixed_point(back, a, c, &o, "pdparams");
    ckpt_close(again);
    ckpt_close(back);
    ckpt_close(in);
    close(fd);
    return 0;
}
