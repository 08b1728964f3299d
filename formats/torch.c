/* torch.save checkpoints: the zip container (torch >= 1.6), the legacy stream of pickles
 * (torch_legacy.c) and the writer (torch_write.c). Byte layouts: docs formats/torch.md.
 *
 * Opening a zip checkpoint: find the one `<archive>/data.pkl`, check `version` and
 * `byteorder`, run the safe pickle VM over data.pkl, turn the tensor constructions into
 * tensors (torch_rebuild.c), then bind each storage key to its `<archive>/data/<key>` record,
 * refusing records whose size disagrees with the pickle (torch 1.x silently loads garbage). */
#include "torch_private.h"

#include <ckpt/sys/zip.h>

#include <stdlib.h>
#include <string.h>

/* The first pickle of a legacy file is the magic number 0x1950a86a20f9469cfc6c as LONG1. */
static const uint8_t legacy_magic[] = { 0x8A, 0x0A, 0x6C, 0xFC, 0x9C, 0x46, 0xF9, 0x20,
                                        0x6A, 0xA8, 0x50, 0x19, 0x2E };

/* Torch's oldest format is a tar with these members. */
static const char *const tar_members[] = { "sys_info", "pickle", "storages", "tensors" };

enum torch_kind { TK_NONE = 0, TK_ZIP, TK_LEGACY, TK_TAR, TK_PREVIEW };

static int is_legacy(const uint8_t *d, uint64_t n)
{
    uint64_t pos = 2;

    if (n < 2 + sizeof legacy_magic || d[0] != 0x80 || d[1] < 2 || d[1] > 5)
        return 0;
    if (d[pos] == 0x95) /* FRAME (protocol 4+) and its 8-byte length */
        pos += 9;
    return n - pos >= sizeof legacy_magic && memcmp(d + pos, legacy_magic, sizeof legacy_magic) == 0;
}

static int is_tar(const uint8_t *d, uint64_t n)
{
    size_t i;

    if (n < 512 || memcmp(d + 257, "ustar", 5) != 0)
        return 0;
    for (i = 0; i < sizeof tar_members / sizeof tar_members[0]; i++)
        if (strncmp((const char *)d, tar_members[i], 100) == 0)
            return 1;
    return 0;
}

static int sniff(const ckpt_file *f)
{
    if (!f || !f->data)
        return TK_NONE;
    if (f->size >= 4 && memcmp(f->data, "PK\3\4", 4) == 0)
        return TK_ZIP;
    if (f->size >= 8 && memcmp(f->data, "PYTORCH1", 8) == 0)
        return TK_PREVIEW;
    if (is_legacy(f->data, f->size))
        return TK_LEGACY;
    return is_tar(f->data, f->size) ? TK_TAR : TK_NONE;
}

/* `<dir>/<want>` with exactly one '/'. */
static int top_record_is(const uint8_t *name, size_t len, const char *want)
{
    const uint8_t *slash = memchr(name, '/', len);
    size_t rest, wlen = strlen(want);

    if (!slash || slash == name)
        return 0;
    rest = len - (size_t)(slash + 1 - name);
    return rest == wlen && memcmp(slash + 1, want, wlen) == 0;
}

/* Looks for data.pkl / constants.pkl in the central directory without parsing the whole
 * archive: the bid must stay cheap. Returns -1 when no directory is found. */
static int scan_directory(const ckpt_file *f, int *data_pkl, int *constants)
{
    const uint8_t *d = f->data;
    uint64_t n = f->size, eocd, lo, cd_off, cd_size, pos, end;

    *data_pkl = *constants = 0;
    if (n < 22)
        return -1;
    lo = n > 22 + 0xFFFF ? n - 22 - 0xFFFF : 0;
    for (eocd = n - 22;; eocd--) {
        if (ckpt_load_u32le(d + eocd) == 0x06054b50u && eocd + 22 + ckpt_load_u16le(d + eocd + 20) <= n)
            break;
        if (eocd == lo)
            return -1;
    }
    cd_size = ckpt_load_u32le(d + eocd + 12);
    cd_off = ckpt_load_u32le(d + eocd + 16);
    if ((cd_off == 0xFFFFFFFFu || cd_size == 0xFFFFFFFFu) && eocd >= 20 &&
        ckpt_load_u32le(d + eocd - 20) == 0x07064b50u) {
        uint64_t z = ckpt_load_u64le(d + eocd - 12);
        if (n < 56 || z > n - 56 || ckpt_load_u32le(d + z) != 0x06064b50u)
            return -1;
        cd_size = ckpt_load_u64le(d + z + 40);
        cd_off = ckpt_load_u64le(d + z + 48);
    }
    if (cd_off > n || cd_size > n - cd_off)
        return -1;
    end = cd_off + cd_size;
    for (pos = cd_off; end - pos >= 46 && ckpt_load_u32le(d + pos) == 0x02014b50u;) {
        uint64_t nl = ckpt_load_u16le(d + pos + 28);
        uint64_t step = 46 + nl + ckpt_load_u16le(d + pos + 30) + ckpt_load_u16le(d + pos + 32);
        if (46 + nl > end - pos)
            break;
        *data_pkl |= top_record_is(d + pos + 46, (size_t)nl, "data.pkl");
        *constants |= top_record_is(d + pos + 46, (size_t)nl, "constants.pkl");
        if (step > end - pos)
            break;
        pos += step;
    }
    return 0;
}

static int torch_bid(const ckpt_probe *p, int best_bid)
{
    const ckpt_file *f = p->file;
    int data_pkl, constants;

    switch (sniff(f)) {
    case TK_ZIP:
        if (best_bid >= 96)
            return -1;
        if (scan_directory(f, &data_pkl, &constants) == 0)
            return data_pkl || constants ? 96 : -1;
        /* No directory: a torch file cut short still starts with its data.pkl header. */
        if (f->size >= 30 && 30 + (uint64_t)ckpt_load_u16le(f->data + 26) <= f->size &&
            top_record_is(f->data + 30, ckpt_load_u16le(f->data + 26), "data.pkl"))
            return 48;
        return -1;
    case TK_LEGACY:
        return 80;
    case TK_PREVIEW:
        return 64;
    case TK_TAR:
        return 40;
    default:
        return -1;
    }
}

/* ---- zip ------------------------------------------------------------------ */

static const ckpt_zip_entry *find_record(const ckpt_zip *z, ckpt_buf *name, const char *prefix, size_t plen,
                                         const char *record)
{
    ckpt_buf_clear(name);
    if (ckpt_buf_append(name, prefix, plen) < 0 || ckpt_buf_puts(name, record) < 0)
        return NULL;
    return ckpt_zip_find(z, (const char *)name->data);
}

/* The one top-level directory that holds data.pkl; *prefix points into the entry name
 * and *plen includes the '/'. */
static int find_archive(const ckpt_zip *z, const char *path, const char **prefix, size_t *plen)
{
    size_t i, n = ckpt_zip_count(z);

    *prefix = NULL;
    for (i = 0; i < n; i++) {
        const char *name = ckpt_zip_entry_at(z, i)->name;
        size_t len = strlen(name);
        if (!top_record_is((const uint8_t *)name, len, "data.pkl"))
            continue;
        if (*prefix)
            return ckpt_error_set(CKPT_EFORMAT, "%s: several torch archives in one zip (%.*s and %s)", path,
                                  (int)*plen, *prefix, name);
        *prefix = name;
        *plen = len - strlen("data.pkl");
    }
    if (!*prefix)
        return ckpt_error_set(CKPT_EFORMAT, "%s: zip archive without <archive>/data.pkl (not a torch.save file)",
                              path);
    return 0;
}

/* A small text record ("version", "byteorder"), NUL-terminated in `out`. */
static int read_small(const ckpt_zip *z, const ckpt_zip_entry *e, const char *path, ckpt_buf *out)
{
    if (e->usize > 64)
        return ckpt_error_set(CKPT_EFORMAT, "%s: record %s is %llu bytes, expected a few", path, e->name,
                              (unsigned long long)e->usize);
    ckpt_buf_clear(out);
    return ckpt_zip_read(z, e, 0, out);
}

static int check_version(const ckpt_zip *z, const char *path, ckpt_buf *name, const char *prefix, size_t plen)
{
    const ckpt_zip_entry *e = find_record(z, name, prefix, plen, ".data/version");
    ckpt_buf text = CKPT_BUF_INIT;
    unsigned long v = 0;
    size_t i = 0;
    int rc;

    if (!e)
        e = find_record(z, name, prefix, plen, "version");
    if (!e)
        return 0;
    rc = read_small(z, e, path, &text);
    if (rc < 0)
        goto done;
    while (i < text.len && text.data[i] >= '0' && text.data[i] <= '9' && v <= 10)
        v = v * 10 + (unsigned long)(text.data[i++] - '0');
    while (i < text.len && (text.data[i] == '\n' || text.data[i] == '\r' || text.data[i] == ' '))
        i++;
    rc = 0;
    if (i == 0 || i != text.len || v < 1 || v > 10)
        rc = ckpt_error_set(CKPT_EFORMAT, "%s: record %s is not an archive version from 1 to 10", path, e->name);
done:
    ckpt_buf_dispose(&text);
    return rc;
}

static int check_byteorder(const ckpt_zip *z, const char *path, ckpt_buf *name, const char *prefix, size_t plen,
                           int *big)
{
    const ckpt_zip_entry *e = find_record(z, name, prefix, plen, "byteorder");
    ckpt_buf text = CKPT_BUF_INIT;
    int rc;

    *big = 0;
    if (!e)
        return 0;
    rc = read_small(z, e, path, &text);
    if (rc >= 0) {
        if (text.len == 3 && memcmp(text.data, "big", 3) == 0)
            *big = 1;
        else if (text.len != 6 || memcmp(text.data, "little", 6) != 0)
            rc = ckpt_error_set(CKPT_EFORMAT, "%s: record %s is neither \"little\" nor \"big\"", path, e->name);
    }
    ckpt_buf_dispose(&text);
    return rc;
}

static int bind_records(const ckpt_zip *z, ckpt_torch_interp *in, ckpt_buf *name, const char *prefix, size_t plen)
{
    size_t i;

    for (i = 0; i < in->n_refs; i++) {
        ckpt_torch_storage_ref *ref = &in->refs[i];
        const ckpt_storage *s = ref->storage;
        const ckpt_zip_entry *e;

        ckpt_buf_clear(name);
        if (ckpt_buf_append(name, prefix, plen) < 0 || ckpt_buf_puts(name, s->key) < 0)
            return CKPT_ENOMEM;
        e = ckpt_zip_find(z, (const char *)name->data);
        if (!e)
            return ckpt_torch__fail(in, CKPT_EFORMAT, ref->path, "storage record %s is missing",
                                    (const char *)name->data);
        if (e->usize != s->nbytes)
            return ckpt_torch__fail(in, CKPT_EFORMAT, ref->path,
                                    "storage record %s holds %llu bytes, expected %llu (%llu x %s)", e->name,
                                    (unsigned long long)e->usize, (unsigned long long)s->nbytes,
                                    (unsigned long long)(s->nbytes / ckpt_dtype_size(s->dtype)),
                                    ckpt_dtype_name(s->dtype));
        ckpt_zip_extent(z, e, &ref->storage->extents[0]);
        ref->bound = 1;
    }
    return 0;
}

int ckpt_torch__read_archive(ckpt_torch_interp *in, const ckpt_file *f, ckpt_value **root)
{
    ckpt_reader *r = in->reader;
    const char *path = f->path;
    const ckpt_open_options *opts = ckpt_reader_options(r);
    ckpt_pickle_read_options popts = CKPT_PICKLE_READ_OPTIONS_INIT;
    ckpt_buf name = CKPT_BUF_INIT, inflated = CKPT_BUF_INIT;
    const ckpt_zip_entry *e;
    const uint8_t *pkl;
    const char *prefix;
    ckpt_zip *z = NULL;
    size_t plen = 0, i, end;
    int rc, big;

    rc = ckpt_zip_open(&z, f);
    if (rc < 0)
        goto done;
    rc = find_archive(z, path, &prefix, &plen);
    if (rc < 0)
        goto done;
    if (find_record(z, &name, prefix, plen, "constants.pkl")) {
        rc = ckpt_error_set(CKPT_EUNSUPPORTED,
                            "%s: TorchScript archive (torch.jit.save), not a torch.save checkpoint", path);
        goto done;
    }
    rc = check_version(z, path, &name, prefix, plen);
    if (rc < 0)
        goto done;
    rc = check_byteorder(z, path, &name, prefix, plen, &big);
    if (rc < 0)
        goto done;
    for (i = 0; opts && opts->verify_crc && i < ckpt_zip_count(z); i++) {
        rc = ckpt_zip_verify(z, ckpt_zip_entry_at(z, i));
        if (rc < 0)
            goto done;
    }

    e = find_record(z, &name, prefix, plen, "data.pkl");
    if (!e) {
        rc = ckpt_error_oom();
        goto done;
    }
    if (e->method == 0) {
        pkl = f->data + e->data_offset; /* lives as long as the mapping, i.e. the checkpoint */
    } else {
        /* value-tree bytes point into the pickle: it lives in the checkpoint's arena */
        uint8_t *copy;
        rc = ckpt_zip_read(z, e, 0, &inflated);
        if (rc < 0)
            goto done;
        if (!(copy = ckpt_arena_alloc(ckpt_reader_arena(r), inflated.len ? inflated.len : 1))) {
            rc = CKPT_ENOMEM;
            goto done;
        }
        memcpy(copy, inflated.data, inflated.len);
        pkl = copy;
    }
    popts.source = path;
    rc = ckpt_pickle_read(root, &end, ckpt_reader_arena(r), pkl, (size_t)e->usize, &popts);
    if (rc < 0)
        goto done;
    in->byteswap = big;
    rc = ckpt_torch__interpret(in, *root);
    if (rc < 0)
        goto done;
    rc = bind_records(z, in, &name, prefix, plen);
    if (rc < 0)
        goto done;
    if (big)
        ckpt_reader_note(r, "%s: storages are big-endian; values are byte-swapped on read", path);
    rc = 0;
done:
    ckpt_buf_dispose(&inflated);
    ckpt_buf_dispose(&name);
    ckpt_zip_close(z);
    return rc;
}

static int zip_open(ckpt_reader *r)
{
    ckpt_torch_interp in;
    ckpt_value *root = NULL;
    int rc;

    ckpt_torch__interp_init(&in, r, "data/", 0);
    rc = ckpt_torch__read_archive(&in, ckpt_reader_file(r), &root);
    if (rc == 0)
        ckpt_reader_set_root(r, root);
    ckpt_torch__interp_dispose(&in);
    return rc;
}

static int torch_open(ckpt_reader *r)
{
    const ckpt_file *f = ckpt_reader_file(r);
    const char *path = ckpt_reader_path(r);

    switch (sniff(f)) {
    case TK_ZIP:
        return zip_open(r);
    case TK_LEGACY:
        return ckpt_torch__legacy_open(r);
    case TK_TAR:
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: tar-based torch.save format (torch 0.3 and older): "
                              "re-save it with a recent torch", path);
    case TK_PREVIEW:
        return ckpt_error_set(CKPT_EUNSUPPORTED, "%s: unsupported archive format from the torch preview release "
                              "(PYTORCH1)", path);
    default:
        return ckpt_error_set(CKPT_EFORMAT, "%s: not a torch.save file (neither a zip archive nor a legacy pickle)",
                              path);
    }
}

extern const ckpt_format_vtable ckpt_format_torch;
const ckpt_format_vtable ckpt_format_torch = {
    .abi_version = CKPT_FORMAT_ABI_VERSION,
    .name = "torch",
    .description = "torch.save checkpoint (zip archive; legacy pickle stream read only)",
    .extensions = ".pt .pth .bin .ckpt",
    .caps = CKPT_FORMAT_READ | CKPT_FORMAT_WRITE | CKPT_FORMAT_METADATA | CKPT_FORMAT_VIEWS | CKPT_FORMAT_CRC,
    .bid = torch_bid,
    .open = torch_open,
    .write_begin = ckpt_torch__write_begin,
    .write_finish = ckpt_torch__write_finish,
    .write_free = ckpt_torch__write_free,
};
