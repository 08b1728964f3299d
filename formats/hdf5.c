/* HDF5 (.h5): any file of datasets, as h5py and the HDF5 C library write them. Groups
 * become nested dicts and names joined with '/', datasets of numbers tensors, attributes
 * values under "__attributes__"; see formats/README.md for what is read and the dtype
 * convention for bfloat16 and float8. */
#include "hdf5_private.h"

extern const ckpt_format_vtable ckpt_format_hdf5;
const ckpt_format_vtable ckpt_format_hdf5 = {
    .abi_version = CKPT_FORMAT_ABI_VERSION,
    .name = "hdf5",
    .description = "HDF5 files of datasets (h5py, the HDF5 C library)",
    .extensions = ".h5 .hdf5 .hdf",
    .caps = CKPT_FORMAT_READ | CKPT_FORMAT_WRITE | CKPT_FORMAT_BY_PATH | CKPT_FORMAT_ENCODES,
    .bid = ckpt_hdf5__bid,
    .open = ckpt_hdf5__open,
    .close = NULL,
    .write_begin = ckpt_hdf5__write_begin,
    .write_finish = ckpt_hdf5__write_finish,
    .write_free = ckpt_hdf5__write_free,
    .bound = ckpt_hdf5__bound,
};
