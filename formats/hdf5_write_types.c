/* The HDF5 file type the writer gives each of our element types: h5py's where h5py has one
 * (float16, bool, complex), the convention of hdf5_private.h for the types HDF5 lacks. */
#include "hdf5_private.h"

static hid_t half_type(void)
{
    /* h5py's float16: IEEE half as a derived float type */
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);

    if (t < 0 || H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, 15) < 0) {
        if (t >= 0)
            H5Tclose(t);
        return -1;
    }
    return t;
}

static hid_t bool_type(void)
{
    /* h5py's bool: an enum over int8 */
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    signed char no = 0, yes = 1;

    if (t < 0 || H5Tenum_insert(t, "FALSE", &no) < 0 || H5Tenum_insert(t, "TRUE", &yes) < 0) {
        if (t >= 0)
            H5Tclose(t);
        return -1;
    }
    return t;
}

static hid_t complex_type(hid_t part, size_t part_size)
{
    /* h5py's complex: a compound of r and i */
    hid_t t = H5Tcreate(H5T_COMPOUND, 2 * part_size);

    if (t < 0 || H5Tinsert(t, "r", 0, part) < 0 || H5Tinsert(t, "i", part_size, part) < 0) {
        if (t >= 0)
            H5Tclose(t);
        return -1;
    }
    return t;
}

hid_t ckpt_hdf5__file_type(ckpt_dtype t, const char **attr)
{
    hid_t base;

    *attr = NULL;
    switch (t) {
    case CKPT_DTYPE_F64: base = H5T_IEEE_F64LE; break;
    case CKPT_DTYPE_F32: base = H5T_IEEE_F32LE; break;
    case CKPT_DTYPE_F16: return half_type();
    case CKPT_DTYPE_BF16: *attr = ckpt_dtype_name(t); base = H5T_STD_U16LE; break;
    case CKPT_DTYPE_F8_E4M3FN:
    case CKPT_DTYPE_F8_E5M2: *attr = ckpt_dtype_name(t); base = H5T_STD_U8LE; break;
    case CKPT_DTYPE_I8: base = H5T_STD_I8LE; break;
    case CKPT_DTYPE_I16: base = H5T_STD_I16LE; break;
    case CKPT_DTYPE_I32: base = H5T_STD_I32LE; break;
    case CKPT_DTYPE_I64: base = H5T_STD_I64LE; break;
    case CKPT_DTYPE_U8: base = H5T_STD_U8LE; break;
    case CKPT_DTYPE_U16: base = H5T_STD_U16LE; break;
    case CKPT_DTYPE_U32: base = H5T_STD_U32LE; break;
    case CKPT_DTYPE_U64: base = H5T_STD_U64LE; break;
    case CKPT_DTYPE_BOOL: return bool_type();
    case CKPT_DTYPE_C64: return complex_type(H5T_IEEE_F32LE, 4);
    case CKPT_DTYPE_C128: return complex_type(H5T_IEEE_F64LE, 8);
    default: return -1;
    }
    return H5Tcopy(base);
}
