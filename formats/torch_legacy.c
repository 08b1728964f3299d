/* The torch.save format before torch 1.6 (`_use_new_zipfile_serialization=False`): five
 * pickles back to back (magic number, protocol version 1001, sys_info, the object, the
 * sorted list of storage keys), then for each listed key an int64 element count and the
 * storage's raw bytes. Persistent ids have a sixth field, an optional storage view.
 *
 * torch writes the counts and the data little-endian whatever the machine (the sys_info
 * `little_endian` flag is informational and torch.load ignores it), so they are read as such. */
#include "torch_private.h"

#include <string.h>

/* 0x1950a86a20f9469cfc6c, little-endian. */
static const uint8_t magic_number[] = { 0x6C, 0xFC, 0x9C, 0x46, 0xF9, 0x20, 0x6A, 0xA8, 0x50, 0x19 };

#define LEGACY_PROTOCOL_VERSION 1001

static int is_magic(const ckpt_value *v)
{
    size_t i;

    if (!v || v->kind != CKPT_VAL_BIGINT || v->u.bigint.len < sizeof magic_number ||
        memcmp(v->u.bigint.data, magic_number, sizeof magic_number) != 0)
        return 0;
    for (i = sizeof magic_number; i < v->u.bigint.len; i++)
        if (v->u.bigint.data[i] != 0)
            return 0;
    return 1;
}

/* Read the next pickle of the stream at *pos. */
static int next_pickle(ckpt_reader *r, const ckpt_file *f, uint64_t *pos, ckpt_value **out)
{
    ckpt_pickle_read_options popts = CKPT_PICKLE_READ_OPTIONS_INIT;
    size_t end;
    int rc;

    if (*pos >= f->size)
        return ckpt_error_set(CKPT_EFORMAT, "%s: legacy torch file ends after %llu bytes (truncated?)",
                              ckpt_reader_path(r), (unsigned long long)f->size);
    popts.source = ckpt_reader_path(r);
    rc = ckpt_pickle_read(out, &end, ckpt_reader_arena(r), f->data + *pos, (size_t)(f->size - *pos), &popts);
    if (rc < 0)
        return rc;
    *pos += end;
    return 0;
}

/* Walk the data section in the order of the key list. */
static int bind_data(ckpt_torch_interp *in, const ckpt_file *f, const ckpt_value *keys, uint64_t pos)
{
    size_t i;

    for (i = 0; i < keys->u.seq.n; i++) {
        const ckpt_value *k = keys->u.seq.items[i];
        ckpt_torch_storage_ref *ref;
        ckpt_extent *ext;
        uint64_t count, nbytes;

        if (k->kind != CKPT_VAL_STR)
            return ckpt_error_set(CKPT_EFORMAT, "%s: storage key list holds a non-string", in->file);
        ref = ckpt_torch__find_ref(in, k->u.str.ptr);
        if (!ref)
            return ckpt_error_set(CKPT_EFORMAT, "%s: storage %s is listed but no tensor uses it", in->file,
                                  k->u.str.ptr);
        if (ref->bound)
            return ckpt_error_set(CKPT_EFORMAT, "%s: storage %s is listed twice", in->file, ref->key);
        if (f->size - pos < 8)
            return ckpt_torch__fail(in, CKPT_EFORMAT, ref->path, "file ends before storage %s (truncated?)",
                                    ref->key);
        count = ckpt_load_u64le(f->data + pos);
        if (count != ref->numel)
            return ckpt_torch__fail(in, CKPT_EFORMAT, ref->path, "storage %s holds %llu elements, the pickle "
                                    "declares %llu", ref->key, (unsigned long long)count,
                                    (unsigned long long)ref->numel);
        pos += 8;
        nbytes = ref->storage->nbytes;
        if (f->size - pos < nbytes)
            return ckpt_torch__fail(in, CKPT_EFORMAT, ref->path, "storage %s needs %llu bytes at offset %llu but "
                                    "the file ends at %llu (truncated?)", ref->key, (unsigned long long)nbytes,
                                    (unsigned long long)pos, (unsigned long long)f->size);
        ext = &ref->storage->extents[0];
        ext->file = f;
        ext->offset = pos;
        ext->stored_size = nbytes;
        ext->size = nbytes;
        ext->encoding = CKPT_EXTENT_RAW;
        ref->bound = 1;
        pos += nbytes;
    }
    for (i = 0; i < in->n_refs; i++)
        if (!in->refs[i].bound)
            return ckpt_torch__fail(in, CKPT_EFORMAT, in->refs[i].path, "storage %s has no data", in->refs[i].key);
    return 0;
}

int ckpt_torch__legacy_open(ckpt_reader *r)
{
    const ckpt_file *f = ckpt_reader_file(r);
    const char *path = ckpt_reader_path(r);
    ckpt_value *magic, *version, *sys_info, *root, *keys;
    const ckpt_value *le;
    ckpt_torch_interp in;
    uint64_t pos = 0;
    int rc;

    ckpt_torch__interp_init(&in, r, "", 1);
    rc = next_pickle(r, f, &pos, &magic);
    if (rc < 0)
        goto done;
    if (!is_magic(magic)) {
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: invalid magic number in legacy torch file", path);
        goto done;
    }
    rc = next_pickle(r, f, &pos, &version);
    if (rc < 0)
        goto done;
    if (version->kind != CKPT_VAL_INT || version->u.integer != LEGACY_PROTOCOL_VERSION) {
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: invalid legacy protocol version (expected %d)", path,
                            LEGACY_PROTOCOL_VERSION);
        goto done;
    }
    rc = next_pickle(r, f, &pos, &sys_info);
    if (rc < 0)
        goto done;
    if (sys_info->kind != CKPT_VAL_DICT) {
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: legacy sys_info is not a dict", path);
        goto done;
    }
    rc = next_pickle(r, f, &pos, &root);
    if (rc < 0)
        goto done;
    rc = next_pickle(r, f, &pos, &keys);
    if (rc < 0)
        goto done;
    if (keys->kind != CKPT_VAL_LIST) {
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: legacy storage key list is not a list", path);
        goto done;
    }
    rc = ckpt_torch__interpret(&in, root);
    if (rc < 0)
        goto done;
    rc = bind_data(&in, f, keys, pos);
    if (rc < 0)
        goto done;
    ckpt_reader_set_root(r, root);
    ckpt_reader_note(r, "legacy torch.save format (before torch 1.6)");
    le = ckpt_value_dict_get(sys_info, "little_endian");
    if (le && le->kind == CKPT_VAL_BOOL && !le->u.boolean)
        ckpt_reader_note(r, "written on a big-endian machine; data read as little-endian, as torch.load does");
done:
    ckpt_torch__interp_dispose(&in);
    return rc;
}
