/* What of an HDF5 file is not tensor data, in the walk's child process: attributes and
 * string datasets as values (ATTR and VALUE records), and datatypes described for
 * ckpt_hdf5__dtype. */
#include "hdf5_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Attributes and string datasets larger than this are left out (with a note): they are
 * metadata, and the value tree is held in memory. */
#define MAX_VALUE_ELEMS 65536
#define MAX_VALUE_BYTES ((size_t)16 << 20)

/* ---- types ---- */

static void copy_hdf5_string(char *dst, size_t cap, char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
    H5free_memory(src);
}

static int describe_atom(hid_t tid, ckpt_h5_atom *a)
{
    H5T_class_t cls = H5Tget_class(tid);
    H5T_order_t order = H5Tget_order(tid);

    memset(a, 0, sizeof *a);
    a->cls = cls == H5T_INTEGER ? CKPT_H5_INTEGER : cls == H5T_FLOAT ? CKPT_H5_FLOAT : CKPT_H5_OTHER;
    if (a->cls == CKPT_H5_OTHER)
        return 0;
    if (order != H5T_ORDER_LE && order != H5T_ORDER_BE) {
        a->cls = CKPT_H5_OTHER;
        return 0;
    }
    a->size = H5Tget_size(tid);
    a->big_endian = order == H5T_ORDER_BE;
    a->precision = H5Tget_precision(tid);
    a->bit_offset = H5Tget_offset(tid) < 0 ? 1 : (size_t)H5Tget_offset(tid);
    if (a->cls == CKPT_H5_INTEGER) {
        a->is_signed = H5Tget_sign(tid) == H5T_SGN_2;
        return 0;
    }
    if (H5Tget_fields(tid, &a->spos, &a->epos, &a->esize, &a->mpos, &a->msize) < 0)
        return CKPT_EIO;
    a->ebias = H5Tget_ebias(tid);
    a->norm_implied = H5Tget_norm(tid) == H5T_NORM_IMPLIED;
    return 0;
}

int ckpt_hdf5__describe_type(hid_t tid, ckpt_h5_type *out, ckpt_h5_names *names)
{
    H5T_class_t cls = H5Tget_class(tid);
    hid_t sub;
    int n, i, rc = 0;

    memset(out, 0, sizeof *out);
    memset(names, 0, sizeof *names);
    out->size = H5Tget_size(tid);
    switch (cls) {
    case H5T_INTEGER:
    case H5T_FLOAT:
        rc = describe_atom(tid, &out->atom);
        out->cls = out->atom.cls;
        return rc;
    case H5T_ENUM:
    case H5T_COMPOUND:
        out->cls = cls == H5T_ENUM ? CKPT_H5_ENUM : CKPT_H5_COMPOUND;
        if ((n = H5Tget_nmembers(tid)) < 0)
            return CKPT_EIO;
        out->n_members = (size_t)n;
        if (cls == H5T_ENUM) {
            if ((sub = H5Tget_super(tid)) < 0)
                return CKPT_EIO;
            rc = describe_atom(sub, &out->atom);
            H5Tclose(sub);
        }
        for (i = 0; rc == 0 && i < n && i < CKPT_H5_MAX_MEMBERS; i++) {
            copy_hdf5_string(names->member[i], sizeof names->member[i], H5Tget_member_name(tid, (unsigned)i));
            out->member_name[i] = names->member[i];
            if (cls == H5T_ENUM) {
                /* only a one-byte enum can be h5py's bool: values matter only there */
                signed char v = -1;
                out->enum_value[i] = out->atom.size == 1 && H5Tget_member_value(tid, (unsigned)i, &v) >= 0 ? v : -1;
                continue;
            }
            out->member_offset[i] = H5Tget_member_offset(tid, (unsigned)i);
            if ((sub = H5Tget_member_type(tid, (unsigned)i)) < 0)
                return CKPT_EIO;
            rc = describe_atom(sub, &out->member[i]);
            H5Tclose(sub);
        }
        return rc;
    case H5T_OPAQUE:
        out->cls = CKPT_H5_OPAQUE;
        copy_hdf5_string(names->tag, sizeof names->tag, H5Tget_tag(tid));
        out->tag = names->tag[0] ? names->tag : NULL;
        return 0;
    default:
        out->cls = CKPT_H5_OTHER;
        return 0;
    }
}

/* ---- reading strings ---- */

/* The C string type strings are read as: variable-length for variable-length ones, else
 * fixed of the stored size (HDF5 pads or terminates them as the file says). */
static hid_t string_memtype(hid_t ftype, int *vlen, size_t *size)
{
    hid_t m = H5Tcopy(H5T_C_S1);

    *vlen = H5Tis_variable_str(ftype) > 0;
    *size = *vlen ? sizeof(char *) : H5Tget_size(ftype) + 1;
    if (m < 0 || H5Tset_size(m, *vlen ? H5T_VARIABLE : *size) < 0 || H5Tset_cset(m, H5Tget_cset(ftype)) < 0 ||
        H5Tset_strpad(m, H5T_STR_NULLTERM) < 0) {
        if (m >= 0)
            H5Tclose(m);
        return -1;
    }
    return m;
}

/* Closes what a value read opened (any of them may be -1) and drops the error stack of a
 * read that could not be one. */
static void close_read(hid_t memtype, hid_t space, hid_t filetype)
{
    if (memtype >= 0)
        H5Tclose(memtype);
    if (space >= 0)
        H5Sclose(space);
    if (filetype >= 0)
        H5Tclose(filetype);
    H5Eclear2(H5E_DEFAULT);
}

/* Element i of strings read into buf. */
static const char *string_at(const unsigned char *buf, size_t i, int vlen, size_t size)
{
    const char *p;

    if (!vlen)
        return (const char *)buf + i * size;
    memcpy(&p, buf + i * size, sizeof p);
    return p ? p : "";
}

int ckpt_hdf5__string_attr(hid_t obj, const char *name, char *buf, size_t cap)
{
    hid_t a = -1, ft = -1, sp = -1, mt = -1;
    unsigned char *tmp = NULL;
    size_t size;
    int vlen, found = 0;

    if (H5Aexists(obj, name) <= 0)
        goto done;
    if ((a = H5Aopen(obj, name, H5P_DEFAULT)) < 0 || (ft = H5Aget_type(a)) < 0 || H5Tget_class(ft) != H5T_STRING ||
        (sp = H5Aget_space(a)) < 0 || H5Sget_simple_extent_npoints(sp) != 1 || (mt = string_memtype(ft, &vlen, &size)) < 0 ||
        !(tmp = calloc(1, size + 1)))
        goto done;
    if (H5Aread(a, mt, tmp) >= 0) {
        snprintf(buf, cap, "%s", string_at(tmp, 0, vlen, size));
        found = 1;
        if (vlen)
            H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, tmp);
    }
done:
    free(tmp);
    if (a >= 0)
        H5Aclose(a);
    close_read(mt, sp, ft);
    return found;
}

/* ---- values ---- */

/* Elements [*at, ...) of one axis and the axes inside it as nested lists (one list for one
 * axis, a scalar for none). */
typedef struct shaped {
    ckpt_h5_out *out;
    int ndim;
    hsize_t dims[H5S_MAX_RANK];
    size_t at;
} shaped;

typedef void (*element_fn)(ckpt_h5_out *o, const unsigned char *buf, size_t i, const void *how);

static void nest(shaped *s, int axis, element_fn fn, const unsigned char *buf, const void *how)
{
    hsize_t k;

    if (axis == s->ndim) {
        fn(s->out, buf, s->at++, how);
        return;
    }
    ckpt_hdf5__put_u8(s->out, CKPT_H5V_LIST);
    ckpt_hdf5__put_u32(s->out, (uint32_t)s->dims[axis]);
    for (k = 0; k < s->dims[axis]; k++)
        nest(s, axis + 1, fn, buf, how);
}

typedef struct string_how {
    int vlen;
    size_t size;
} string_how;

static void string_elem(ckpt_h5_out *o, const unsigned char *buf, size_t i, const void *how)
{
    const string_how *h = how;

    ckpt_hdf5__put_u8(o, CKPT_H5V_STR);
    ckpt_hdf5__put_str(o, string_at(buf, i, h->vlen, h->size));
}

typedef enum { NUM_INT, NUM_UINT, NUM_FLOAT, NUM_BOOL } num_kind;

static void number_elem(ckpt_h5_out *o, const unsigned char *buf, size_t i, const void *how)
{
    num_kind k = *(const num_kind *)how;
    uint64_t u;
    double d;

    memcpy(&u, buf + i * 8, 8);
    if (k == NUM_UINT && u > (uint64_t)INT64_MAX) {
        d = (double)u;
        memcpy(&u, &d, 8);
        k = NUM_FLOAT;
    }
    ckpt_hdf5__put_u8(o, k == NUM_FLOAT ? CKPT_H5V_FLOAT : k == NUM_BOOL ? CKPT_H5V_BOOL : CKPT_H5V_INT);
    if (k == NUM_BOOL)
        ckpt_hdf5__put_u8(o, u != 0);
    else
        ckpt_hdf5__put_u64(o, u);
}

/* How a type is read as a value: strings, or numbers read as int64/uint64/double; 0 when it
 * cannot be. */
static int value_kind(hid_t ft, int *is_string, num_kind *kind, hid_t *memtype, string_how *sh)
{
    ckpt_h5_type t;
    ckpt_h5_names names;
    ckpt_dtype d;
    unsigned info;
    int swap;
    char why[160];

    *is_string = H5Tget_class(ft) == H5T_STRING;
    if (*is_string)
        return (*memtype = string_memtype(ft, &sh->vlen, &sh->size)) >= 0;
    if (ckpt_hdf5__describe_type(ft, &t, &names) < 0 || t.cls == CKPT_H5_OPAQUE || t.cls == CKPT_H5_COMPOUND ||
        ckpt_hdf5__dtype(&t, NULL, &d, &swap, &info, why, sizeof why) < 0)
        return 0;
    *kind = d == CKPT_DTYPE_BOOL ? NUM_BOOL : ckpt_dtype_is_float(d) ? NUM_FLOAT
            : (d == CKPT_DTYPE_U64 || d == CKPT_DTYPE_U32) ? NUM_UINT : NUM_INT;
    /* HDF5 converts to these itself, enums to their integers too */
    *memtype = H5Tcopy(*kind == NUM_FLOAT ? H5T_NATIVE_DOUBLE : *kind == NUM_UINT ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64);
    return *memtype >= 0;
}

/* One attribute or dataset (`is_attr`) as a value: 1 when it is one, its record's head
 * (`tag` and its strings a and b, b NULL for none) then the value sent; 0 when it cannot be
 * one, nothing sent. */
static int put_value(ckpt_h5_walker *h, hid_t obj, int is_attr, unsigned tag, const char *a, const char *b)
{
    hid_t ft = -1, sp = -1, mt = -1;
    unsigned char *buf = NULL;
    string_how sh = { 0, 0 };
    num_kind kind = NUM_INT;
    shaped s;
    hssize_t n;
    int is_string, ok = 0;

    memset(&s, 0, sizeof s);
    s.out = h->out;
    ft = is_attr ? H5Aget_type(obj) : H5Dget_type(obj);
    sp = is_attr ? H5Aget_space(obj) : H5Dget_space(obj);
    if (ft < 0 || sp < 0 || (n = H5Sget_simple_extent_npoints(sp)) < 0 || n > MAX_VALUE_ELEMS ||
        (s.ndim = H5Sget_simple_extent_ndims(sp)) < 0 || H5Sget_simple_extent_dims(sp, s.dims, NULL) < 0 ||
        H5Sget_simple_extent_type(sp) == H5S_NULL || !value_kind(ft, &is_string, &kind, &mt, &sh))
        goto done;
    if ((size_t)n * (is_string ? sh.size : 8) > MAX_VALUE_BYTES || !(buf = calloc((size_t)n + 1, is_string ? sh.size : 8)))
        goto done;
    if ((is_attr ? H5Aread(obj, mt, buf) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) < 0)
        goto done;
    ckpt_hdf5__put_u8(h->out, tag);
    ckpt_hdf5__put_str(h->out, a);
    if (b)
        ckpt_hdf5__put_str(h->out, b);
    if (is_string)
        nest(&s, 0, string_elem, buf, &sh);
    else
        nest(&s, 0, number_elem, buf, &kind);
    ok = 1;
    if (is_string && sh.vlen)
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, buf);
done:
    free(buf);
    close_read(mt, sp, ft);
    return ok;
}

int ckpt_hdf5__string_dataset(ckpt_h5_walker *h, hid_t d, const char *key)
{
    hid_t ft = H5Dget_type(d);
    int is_string = ft >= 0 && H5Tget_class(ft) == H5T_STRING;

    if (ft >= 0)
        H5Tclose(ft);
    return is_string ? put_value(h, d, 0, CKPT_H5R_VALUE, key, NULL) : 0;
}

typedef struct attr_walk {
    ckpt_h5_walker *h;
    const char *where;
    int rc;
} attr_walk;

static herr_t one_attribute(hid_t obj, const char *name, const H5A_info_t *info, void *payload)
{
    attr_walk *w = payload;
    ckpt_h5_walker *h = w->h;
    hid_t a;
    int ok;

    (void)info;
    /* a dataset's "dtype" is part of its type (the convention), already the tensor's dtype */
    if (strcmp(name, CKPT_H5_DTYPE_ATTR) == 0 && H5Iget_type(obj) == H5I_DATASET)
        return 0;
    if ((a = H5Aopen(obj, name, H5P_DEFAULT)) < 0) {
        w->rc = ckpt_hdf5__corrupt(h->path, "cannot open attribute '%s' of '%s'", name, w->where);
        return -1;
    }
    ok = put_value(h, a, 1, CKPT_H5R_ATTR, w->where, name);
    H5Aclose(a);
    if (!ok)
        ckpt_hdf5__put_note(h->out, "%s: attribute '%s' of '%s' skipped: not a string or a small array of numbers",
                            h->path, name, w->where);
    return 0;
}

int ckpt_hdf5__attributes(ckpt_h5_walker *h, hid_t obj, const char *where)
{
    attr_walk w = { h, where, 0 };
    hsize_t at = 0;

    /* creation order where the file tracks it (h5py keeps it for attributes), else by name */
    if (H5Aiterate2(obj, H5_INDEX_CRT_ORDER, H5_ITER_INC, &at, one_attribute, &w) < 0 && w.rc == 0) {
        H5Eclear2(H5E_DEFAULT);
        at = 0;
        if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &at, one_attribute, &w) < 0 && w.rc == 0)
            return ckpt_hdf5__corrupt(h->path, "cannot list the attributes of '%s'", where);
    }
    return w.rc;
}
