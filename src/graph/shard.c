/* Hugging Face output sharding (see ckpt/shard.h for the rules).
 *
 * Every entry ends up in exactly one file, so the files' entry lists are slices of one
 * array of n indices. Entries that share a storage are chained behind the first of them
 * (its root), which keeps joining them to the root's file linear in n. */
#include <ckpt/shard.h>
#include <ckpt/sys/common.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE ((size_t)-1)

/* One weight_map item of the index. */
typedef struct shard_item {
    const char *name;
    size_t file;
} shard_item;

typedef struct shard_plan {
    ckpt_shard_plan pub; /* first: callers see only this */
    ckpt_shard_file *files;
    size_t *order;       /* the files' entries, file after file */
    shard_item *items;   /* every entry, sorted by name */
    size_t n_items;
    char *names;         /* the entries' names, copied */
    char *file_names;    /* the files' names and the index's, one after another */
} shard_plan;

/* The working arrays of one split. */
typedef struct split {
    size_t *root;      /* the first entry of each entry's storage */
    size_t *next;      /* the next entry of the same storage, after the root */
    size_t *last;      /* per root: the last entry chained behind it */
    size_t *file_of;
    size_t *rank;      /* per file, by creation: its place among the files */
    size_t *cursor;    /* per file: where its next entry goes in the order */
} split;

static int check_entries(const ckpt_shard_entry *entries, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (!entries[i].name)
            return ckpt_error_set(CKPT_EINVALID, "shard entry %zu has no name", i);
        if (entries[i].same_as != CKPT_SHARD_OWN_STORAGE && entries[i].same_as >= i)
            return ckpt_error_set(CKPT_EINVALID, "%s: shares the storage of entry %zu, which does not come before "
                                  "it (entry %zu)", entries[i].name, entries[i].same_as, i);
    }
    return 0;
}

/* Roots and chains; empty storages of their own all share the first one. */
static void find_storages(split *s, const ckpt_shard_entry *entries, size_t n)
{
    size_t i, first_empty = NONE;

    for (i = 0; i < n; i++) {
        size_t r = i;
        s->next[i] = s->last[i] = NONE;
        if (entries[i].same_as != CKPT_SHARD_OWN_STORAGE)
            r = s->root[entries[i].same_as];
        else if (entries[i].nbytes == 0 && first_empty != NONE)
            r = first_empty;
        else if (entries[i].nbytes == 0)
            first_empty = i;
        s->root[i] = r;
        if (r != i) {
            if (s->last[r] == NONE)
                s->next[r] = i;
            else
                s->next[s->last[r]] = i;
            s->last[r] = i;
        }
    }
}

/* The file of every root, in huggingface_hub's order; the number of files. A file gets its
 * number when it is complete: a big entry met while the current file is open comes
 * before it. Meanwhile file_of holds the number of the file's creation. */
static size_t assign_files(split *s, const ckpt_shard_entry *entries, size_t n, uint64_t max, uint64_t *total)
{
    size_t i, n_made = 0, n_files = 0, cur = NONE;
    uint64_t cur_size = 0;

    *total = 0;
    for (i = 0; i < n; i++) {
        uint64_t size = entries[i].nbytes;
        if (s->root[i] != i)
            continue;
        *total += size;
        if (size > max) {
            s->rank[n_made] = n_files++;
            s->file_of[i] = n_made++;
            continue;
        }
        if (cur != NONE && size > max - cur_size) {
            s->rank[cur] = n_files++;
            cur = NONE;
        }
        if (cur == NONE) {
            cur = n_made++;
            cur_size = 0;
        }
        s->file_of[i] = cur;
        cur_size += size;
    }
    if (cur != NONE)
        s->rank[cur] = n_files++;
    /* a root comes before the entries sharing its storage */
    for (i = 0; i < n; i++)
        s->file_of[i] = s->root[i] == i ? s->rank[s->file_of[i]] : s->file_of[s->root[i]];
    return n_files;
}

static int name_files(shard_plan *p, const char *base, const char *ext)
{
    size_t i, n = p->pub.n_files, each = strlen(base) + strlen(ext) + 64, off = 0;

    if (!(p->file_names = malloc((n + 1) * each)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++) {
        char *name = p->file_names + off;
        if (n == 1)
            off += (size_t)snprintf(name, each, "%s%s", base, ext) + 1;
        else
            off += (size_t)snprintf(name, each, "%s-%05zu-of-%05zu%s", base, i + 1, n, ext) + 1;
        p->files[i].name = name;
    }
    if (n > 1) {
        snprintf(p->file_names + off, each, "%s%s.index.json", base, ext);
        p->pub.index_name = p->file_names + off;
    }
    return 0;
}

/* The files' entry lists: roots in order, then the entries sharing a root's storage, root
 * by root. A single file keeps the given order, as huggingface_hub does. */
static void fill_files(shard_plan *p, const split *s, const ckpt_shard_entry *entries, size_t n)
{
    size_t i, j, off = 0, n_files = p->pub.n_files;

    for (i = 0; i < n; i++) {
        p->files[s->file_of[i]].n_entries++;
        if (s->root[i] == i)
            p->files[s->file_of[i]].nbytes += entries[i].nbytes;
    }
    for (i = 0; i < n_files; i++) {
        s->cursor[i] = off;
        p->files[i].entries = p->order + off;
        off += p->files[i].n_entries;
    }
    if (n_files == 1) {
        for (i = 0; i < n; i++)
            p->order[i] = i;
        return;
    }
    for (i = 0; i < n; i++)
        if (s->root[i] == i)
            p->order[s->cursor[s->file_of[i]]++] = i;
    for (i = 0; i < n; i++)
        for (j = s->root[i] == i ? s->next[i] : NONE; j != NONE; j = s->next[j])
            p->order[s->cursor[s->file_of[i]]++] = j;
}

static int item_cmp(const void *a, const void *b)
{
    return strcmp(((const shard_item *)a)->name, ((const shard_item *)b)->name);
}

/* The weight map, sorted as Python's sort_keys sorts (UTF-8 bytes sort as code points). */
static int index_items(shard_plan *p, const split *s, const ckpt_shard_entry *entries, size_t n)
{
    size_t i, len = 0, off = 0;

    for (i = 0; i < n; i++)
        len += strlen(entries[i].name) + 1;
    if (!(p->names = malloc(len + 1)) || !(p->items = calloc(n + 1, sizeof *p->items)))
        return ckpt_error_oom();
    for (i = 0; i < n; i++) {
        size_t k = strlen(entries[i].name) + 1;
        memcpy(p->names + off, entries[i].name, k);
        p->items[i].name = p->names + off;
        p->items[i].file = s->file_of[i];
        off += k;
    }
    p->n_items = n;
    qsort(p->items, n, sizeof *p->items, item_cmp);
    for (i = 1; i < n; i++)
        if (strcmp(p->items[i - 1].name, p->items[i].name) == 0)
            return ckpt_error_set(CKPT_EINVALID, "%s: two tensors of that name in one sharded output",
                                  p->items[i].name);
    return 0;
}

int ckpt_shard_plan_new(ckpt_shard_plan **out, const ckpt_shard_entry *entries, size_t n, uint64_t max_size,
                        const char *base, const char *ext)
{
    shard_plan *p = calloc(1, sizeof *p);
    size_t *work = NULL;
    split s;
    int rc;

    *out = NULL;
    if (!p)
        return ckpt_error_oom();
    if ((rc = check_entries(entries, n)) < 0)
        goto done;
    if (!(work = malloc((6 * n + 1) * sizeof *work)) || !(p->order = malloc((n + 1) * sizeof *p->order))) {
        rc = ckpt_error_oom();
        goto done;
    }
    s.root = work;
    s.next = work + n;
    s.last = work + 2 * n;
    s.file_of = work + 3 * n;
    s.rank = work + 4 * n;
    s.cursor = work + 5 * n;
    find_storages(&s, entries, n);
    p->pub.n_files = assign_files(&s, entries, n, max_size, &p->pub.total_size);
    if (!(p->files = calloc(p->pub.n_files + 1, sizeof *p->files))) {
        rc = ckpt_error_oom();
        goto done;
    }
    p->pub.files = p->files;
    fill_files(p, &s, entries, n);
    if ((rc = name_files(p, base, ext)) < 0 || (rc = index_items(p, &s, entries, n)) < 0)
        goto done;
    *out = &p->pub;

done:
    free(work);
    if (rc < 0)
        ckpt_shard_plan_free(&p->pub);
    return rc;
}

void ckpt_shard_plan_free(ckpt_shard_plan *pub)
{
    shard_plan *p = (shard_plan *)pub;

    if (!p)
        return;
    free(p->files);
    free(p->order);
    free(p->items);
    free(p->names);
    free(p->file_names);
    free(p);
}

#define SHORT_ESCAPED "\"\\\b\f\n\r\t"
#define SHORT_ESCAPES "\"\\bfnrt"

/* Surrogate pairs above U+FFFF, as Python writes them. */
/* A float as Python's repr writes it: the shortest digits that read back, positional for
 * exponents in [-4, 16), ".0" when whole. */
int ckpt_shard_json_float(ckpt_buf *b, double v)
{
    char text[64];
    int prec, exp10;

    for (prec = 1; prec < 17; prec++) {
        snprintf(text, sizeof text, "%.*e", prec - 1, v);
        if (strtod(text, NULL) == v)
            break;
    }
    exp10 = v == 0 ? 0 : (int)floor(log10(fabs(v)));
    if (v != 0 && (exp10 < -4 || exp10 >= 16))
        return ckpt_buf_puts(b, text);
    snprintf(text, sizeof text, "%.*f", prec - 1 - exp10 > 0 ? prec - 1 - exp10 : 0, v);
    if (!strchr(text, '.'))
        strcat(text, ".0");
    return ckpt_buf_puts(b, text);
}

int ckpt_shard_json_string(ckpt_buf *b, const char *s)
{
    static const uint8_t lead_bits[5] = { 0, 0x7F, 0x1F, 0x0F, 0x07 }; /* by sequence length */
    const unsigned char *p = (const unsigned char *)s;
    const char *short_escape;
    int rc = ckpt_buf_putc(b, '"');

    while (rc == 0 && *p) {
        uint32_t c = *p;
        int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0, k;
        if (len == 0)
            return ckpt_error_set(CKPT_EINVALID, "name %s is not valid UTF-8", s);
        c &= lead_bits[len];
        for (k = 1; k < len; k++) {
            if ((p[k] & 0xC0) != 0x80)
                return ckpt_error_set(CKPT_EINVALID, "name %s is not valid UTF-8", s);
            c = c << 6 | (p[k] & 0x3Fu);
        }
        p += len;
        short_escape = c < 0x80 ? strchr(SHORT_ESCAPED, (int)c) : NULL;
        if (short_escape)
            rc = ckpt_buf_printf(b, "\\%c", SHORT_ESCAPES[short_escape - SHORT_ESCAPED]);
        else if (c >= 0x20 && c < 0x7F)
            rc = ckpt_buf_putc(b, (uint8_t)c);
        else if (c < 0x10000)
            rc = ckpt_buf_printf(b, "\\u%04x", (unsigned)c);
        else
            rc = ckpt_buf_printf(b, "\\u%04x\\u%04x", (unsigned)(0xD800 + ((c - 0x10000) >> 10)),
                                 (unsigned)(0xDC00 + ((c - 0x10000) & 0x3FF)));
    }
    return rc == 0 ? ckpt_buf_putc(b, '"') : rc;
}

int ckpt_shard_index_json(const ckpt_shard_plan *pub, uint64_t total_parameters, ckpt_buf *out)
{
    const shard_plan *p = (const shard_plan *)pub;
    size_t i;
    int rc = ckpt_buf_puts(out, "{\n  \"metadata\": {\n");

    if (rc == 0 && total_parameters)
        rc = ckpt_buf_printf(out, "    \"total_parameters\": %llu,\n", (unsigned long long)total_parameters);
    if (rc == 0)
        rc = ckpt_buf_printf(out, "    \"total_size\": %llu\n  },\n  \"weight_map\": {",
                             (unsigned long long)pub->total_size);

    for (i = 0; i < p->n_items && rc == 0; i++) {
        const char *file = p->files[p->items[i].file].name, *slash = strrchr(file, '/');
        if ((rc = ckpt_buf_puts(out, i ? ",\n    " : "\n    ")) == 0 &&
            (rc = ckpt_shard_json_string(out, p->items[i].name)) == 0 && (rc = ckpt_buf_puts(out, ": ")) == 0)
            rc = ckpt_shard_json_string(out, slash ? slash + 1 : file);
    }
    return rc == 0 ? ckpt_buf_puts(out, p->n_items ? "\n  }\n}\n" : "}\n}\n") : rc;
}
