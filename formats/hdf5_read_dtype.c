/* HDF5 datatypes and filter pipelines as the reader interprets them, without libhdf5: an
 * HDF5 type (plus the "dtype" attribute of the convention in hdf5_private.h) becomes one of
 * our element types, a chunk's filters become the encoding of its extent. Both are pure so
 * that the fuzz harnesses drive them directly. */
#include "hdf5_private.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- type names ---- */

/* Spellings ckpt_dtype_from_name does not know, seen in the wild for the types HDF5 lacks. */
static const struct {
    const char *name;
    ckpt_dtype dtype;
} aliases[] = {
    { "bfloat", CKPT_DTYPE_BF16 },
    { "brain_float16", CKPT_DTYPE_BF16 },
    { "float8_e4m3", CKPT_DTYPE_F8_E4M3FN },
    { "e4m3", CKPT_DTYPE_F8_E4M3FN },
    { "e4m3fn", CKPT_DTYPE_F8_E4M3FN },
    { "f8e4m3", CKPT_DTYPE_F8_E4M3FN },
    { "f8e4m3fn", CKPT_DTYPE_F8_E4M3FN },
    { "fp8_e4m3fn", CKPT_DTYPE_F8_E4M3FN },
    { "e5m2", CKPT_DTYPE_F8_E5M2 },
    { "f8e5m2", CKPT_DTYPE_F8_E5M2 },
    { "bool_", CKPT_DTYPE_BOOL },
};

/* Module prefixes people leave on a type name ("torch.bfloat16", "ml_dtypes.bfloat16"). */
static const char *const prefixes[] = { "torch.", "ml_dtypes.", "numpy.", "np.", "jax.numpy.", "jnp.", "tf." };

ckpt_dtype ckpt_hdf5__dtype_name(const char *name)
{
    char low[64];
    const char *p;
    size_t i, n;
    ckpt_dtype d;

    if (!name)
        return CKPT_DTYPE_INVALID;
    while (isspace((unsigned char)*name))
        name++;
    n = strlen(name);
    while (n && isspace((unsigned char)name[n - 1]))
        n--;
    if (n == 0 || n >= sizeof low)
        return CKPT_DTYPE_INVALID;
    for (i = 0; i < n; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    low[n] = '\0';
    p = low;
    /* h5py.opaque_dtype tags the type "NUMPY:" + numpy's dtype.str: ml_dtypes' float8_e5m2
     * is the one 1-byte float numpy knows ("<f1"); the other ml_dtypes types are "<V1"/"<V2",
     * which name nothing */
    if (strncmp(p, "numpy:", 6) == 0) {
        p += 6;
        if (strcmp(p, "<f1") == 0 || strcmp(p, "|f1") == 0 || strcmp(p, "=f1") == 0)
            return CKPT_DTYPE_F8_E5M2;
    }
    for (i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t k = strlen(prefixes[i]);
        if (strncmp(p, prefixes[i], k) == 0) {
            p += k;
            break;
        }
    }
    if ((d = ckpt_dtype_from_name(p)) != CKPT_DTYPE_INVALID)
        return d;
    for (i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(p, aliases[i].name) == 0)
            return aliases[i].dtype;
    return CKPT_DTYPE_INVALID;
}

/* ---- element types ---- */

static int fail(char *why, size_t cap, int code, const char *fmt, ...) CKPT_FORMAT_PRINTF(4, 5);

static int fail(char *why, size_t cap, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return code;
}

static ckpt_dtype int_dtype(const ckpt_h5_atom *a)
{
    static const ckpt_dtype s[] = { CKPT_DTYPE_I8, CKPT_DTYPE_I16, CKPT_DTYPE_I32, CKPT_DTYPE_I64 };
    static const ckpt_dtype u[] = { CKPT_DTYPE_U8, CKPT_DTYPE_U16, CKPT_DTYPE_U32, CKPT_DTYPE_U64 };
    int k = a->size == 1 ? 0 : a->size == 2 ? 1 : a->size == 4 ? 2 : a->size == 8 ? 3 : -1;

    /* padding bits would be read as value bits */
    if (k < 0 || a->precision != a->size * 8 || a->bit_offset != 0)
        return CKPT_DTYPE_INVALID;
    return a->is_signed ? s[k] : u[k];
}

/* The IEEE layouts HDF5 can describe that are one of ours, bit for bit: HDF5's own float16,
 * 32 and 64 (h5py's float16 is this layout too), and the bfloat16 and float8 layouts HDF5
 * 2.0 predefines. */
static ckpt_dtype float_dtype(const ckpt_h5_atom *a)
{
    static const struct {
        size_t size, spos, epos, esize, mpos, msize, ebias;
        ckpt_dtype dtype;
    } known[] = {
        { 2, 15, 10, 5, 0, 10, 15, CKPT_DTYPE_F16 },
        { 4, 31, 23, 8, 0, 23, 127, CKPT_DTYPE_F32 },
        { 8, 63, 52, 11, 0, 52, 1023, CKPT_DTYPE_F64 },
        { 2, 15, 7, 8, 0, 7, 127, CKPT_DTYPE_BF16 },
        { 1, 7, 3, 4, 0, 3, 7, CKPT_DTYPE_F8_E4M3FN },
        { 1, 7, 2, 5, 0, 2, 15, CKPT_DTYPE_F8_E5M2 },
    };
    size_t i;

    if (a->cls != CKPT_H5_FLOAT || !a->norm_implied || a->precision != a->size * 8 || a->bit_offset != 0)
        return CKPT_DTYPE_INVALID;
    for (i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].size == a->size && known[i].spos == a->spos && known[i].epos == a->epos &&
            known[i].esize == a->esize && known[i].mpos == a->mpos && known[i].msize == a->msize &&
            known[i].ebias == a->ebias)
            return known[i].dtype;
    return CKPT_DTYPE_INVALID;
}

/* h5py's complex: a compound of two equal floats named r and i, r first, packed. */
static ckpt_dtype complex_dtype(const ckpt_h5_type *t, int *byteswap)
{
    const ckpt_h5_atom *r = &t->member[0], *im = &t->member[1];
    ckpt_dtype f;

    if (t->n_members != 2 || !t->member_name[0] || !t->member_name[1] || strcmp(t->member_name[0], "r") != 0 ||
        strcmp(t->member_name[1], "i") != 0 || t->member_offset[0] != 0 || t->member_offset[1] != r->size ||
        t->size != 2 * r->size || r->big_endian != im->big_endian)
        return CKPT_DTYPE_INVALID;
    f = float_dtype(r);
    if (f != float_dtype(im) || (f != CKPT_DTYPE_F32 && f != CKPT_DTYPE_F64))
        return CKPT_DTYPE_INVALID;
    *byteswap = r->big_endian;
    return f == CKPT_DTYPE_F32 ? CKPT_DTYPE_C64 : CKPT_DTYPE_C128;
}

/* The types HDF5 has no class for, which the convention stores as integers or opaque. */
static int needs_attribute(ckpt_dtype d)
{
    return d == CKPT_DTYPE_BF16 || d == CKPT_DTYPE_F8_E4M3FN || d == CKPT_DTYPE_F8_E5M2 || d == CKPT_DTYPE_BOOL;
}

int ckpt_hdf5__dtype(const ckpt_h5_type *t, const char *attr, ckpt_dtype *dtype, int *byteswap, unsigned *info,
                     char *why, size_t cap)
{
    ckpt_dtype named = attr ? ckpt_hdf5__dtype_name(attr) : CKPT_DTYPE_INVALID, d;
    int swap = 0;

    *dtype = CKPT_DTYPE_INVALID;
    *byteswap = 0;
    *info = 0;
    if (cap)
        *why = '\0';
    switch (t->cls) {
    case CKPT_H5_INTEGER:
        if ((d = int_dtype(&t->atom)) == CKPT_DTYPE_INVALID || t->size != t->atom.size)
            return fail(why, cap, CKPT_EUNSUPPORTED, "an integer type other than 8, 16, 32 or 64 bits");
        swap = t->atom.big_endian;
        /* the convention: the attribute says what the unsigned integers hold */
        if (named != CKPT_DTYPE_INVALID && needs_attribute(named)) {
            if (ckpt_dtype_size(named) != t->size)
                return fail(why, cap, CKPT_EFORMAT, "its \"dtype\" attribute says %s, which does not fit the size "
                            "of its integers", ckpt_dtype_name(named));
            d = named;
        }
        break;
    case CKPT_H5_FLOAT:
        if ((d = float_dtype(&t->atom)) == CKPT_DTYPE_INVALID || t->size != t->atom.size)
            return fail(why, cap, CKPT_EUNSUPPORTED, "a floating-point layout that is not IEEE binary16/32/64, "
                        "bfloat16 or float8");
        swap = t->atom.big_endian;
        break;
    case CKPT_H5_ENUM:
        if (t->atom.cls != CKPT_H5_INTEGER || (d = int_dtype(&t->atom)) == CKPT_DTYPE_INVALID ||
            t->size != t->atom.size)
            return fail(why, cap, CKPT_EUNSUPPORTED, "an enum over a type that is not a plain integer");
        swap = t->atom.big_endian;
        if (t->size == 1 && t->n_members == 2 && t->member_name[0] && t->member_name[1] &&
            strcmp(t->member_name[0], "FALSE") == 0 && t->enum_value[0] == 0 &&
            strcmp(t->member_name[1], "TRUE") == 0 && t->enum_value[1] == 1)
            d = CKPT_DTYPE_BOOL;
        else
            *info |= CKPT_H5_ENUM_INT;
        break;
    case CKPT_H5_COMPOUND:
        if ((d = complex_dtype(t, &swap)) == CKPT_DTYPE_INVALID)
            return fail(why, cap, CKPT_EUNSUPPORTED, "a compound type other than h5py's complex (two equal floats "
                        "named r and i)");
        break;
    case CKPT_H5_OPAQUE:
        /* the tag first names the type (h5py.opaque_dtype), then the attribute; h5py writes
         * an ml_dtypes.bfloat16 array as an untagged 2-byte opaque type */
        d = ckpt_hdf5__dtype_name(t->tag);
        if (d == CKPT_DTYPE_INVALID)
            d = named;
        if (d == CKPT_DTYPE_INVALID && t->size == 2) {
            d = CKPT_DTYPE_BF16;
            *info |= CKPT_H5_GUESSED;
        }
        if (d == CKPT_DTYPE_INVALID)
            return fail(why, cap, CKPT_EUNSUPPORTED, "an opaque type (tag '%s') that neither its tag nor a \"dtype\" "
                        "attribute names",
                        t->tag ? t->tag : "");
        if (ckpt_dtype_size(d) != t->size)
            return fail(why, cap, CKPT_EFORMAT, "an opaque type whose tag or \"dtype\" attribute says %s, which "
                        "does not fit its size", ckpt_dtype_name(d));
        break;
    default:
        return fail(why, cap, CKPT_EUNSUPPORTED, "a non-numeric type");
    }
    *dtype = d;
    *byteswap = swap && ckpt_dtype_size(d) > 1;
    return 0;
}

/* ---- chunk filters ---- */

const char *ckpt_hdf5__filter_name(unsigned id)
{
    switch (id) {
    case CKPT_H5_FILTER_DEFLATE: return "deflate";
    case CKPT_H5_FILTER_SHUFFLE: return "shuffle";
    case CKPT_H5_FILTER_FLETCHER32: return "fletcher32";
    case 4: return "szip";
    case 5: return "nbit";
    case 6: return "scaleoffset";
    case 307: return "bzip2";
    case 32000: return "lzf";
    case 32001: return "blosc";
    case 32004: return "lz4";
    case 32008: return "bitshuffle";
    case CKPT_H5_FILTER_ZSTD: return "zstd";
    case 32026: return "blosc2";
    default: return "unknown";
    }
}

int ckpt_hdf5__chunk_encoding(const ckpt_h5_pipeline *p, unsigned mask, size_t es, ckpt_extent *e, char *why,
                              size_t cap)
{
    /* What we decode is one pipeline shape, in HDF5's write order: shuffle, then one
     * compressor, then the checksum, each optional (h5py's order, and hdf5plugin's). */
    enum { SHUFFLE, COMPRESS, CHECKSUM, DONE } stage = SHUFFLE;
    size_t i;

    e->encoding = CKPT_EXTENT_RAW;
    e->shuffle = 0;
    e->flags = 0;
    if (cap)
        *why = '\0';
    if (p->n > CKPT_H5_MAX_FILTERS) {
        snprintf(why, cap, "%zu filters", p->n);
        return CKPT_EUNSUPPORTED;
    }
    for (i = 0; i < p->n; i++) {
        unsigned id = p->id[i];
        if (i < 32 && (mask >> i & 1u))
            continue;
        if (id == CKPT_H5_FILTER_SHUFFLE && stage == SHUFFLE) {
            size_t k = p->shuffle_size[i] ? p->shuffle_size[i] : es;
            e->shuffle = k > 1 ? (uint32_t)k : 0;
            stage = COMPRESS;
        } else if ((id == CKPT_H5_FILTER_DEFLATE || id == CKPT_H5_FILTER_ZSTD) && stage <= COMPRESS) {
            e->encoding = id == CKPT_H5_FILTER_DEFLATE ? CKPT_EXTENT_ZLIB : CKPT_EXTENT_ZSTD;
            stage = CHECKSUM;
        } else if (id == CKPT_H5_FILTER_FLETCHER32 && stage <= CHECKSUM) {
            e->flags |= CKPT_EXTENT_FLETCHER32;
            stage = DONE;
        } else {
            if (id != CKPT_H5_FILTER_DEFLATE && id != CKPT_H5_FILTER_SHUFFLE && id != CKPT_H5_FILTER_FLETCHER32 &&
                id != CKPT_H5_FILTER_ZSTD)
                snprintf(why, cap, "filter %u (%s) is not supported (deflate, shuffle, fletcher32 and zstd are)", id,
                         ckpt_hdf5__filter_name(id));
            else
                snprintf(why, cap, "filter %u (%s) comes after filters it should precede (order: shuffle, "
                         "deflate or zstd, fletcher32)", id, ckpt_hdf5__filter_name(id));
            return CKPT_EUNSUPPORTED;
        }
    }
    return 0;
}
