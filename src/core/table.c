/* Open addressing with linear probing, slots holding key and value together (one cache
 * line per probe). Tables double at half load; string slots keep their hash, so probes
 * compare bytes only on a full hash match and growing reads no key again. */
#include <ckpt/sys/table.h>

#include <stdlib.h>
#include <string.h>

struct ckpt_strmap_slot {
    const char *key; /* NULL: empty */
    size_t len;
    uint64_t hash, val;
};

struct ckpt_u64map_slot {
    uint64_t key, val;
};

#define U64_EMPTY UINT64_MAX

/* Mixes every input bit into the low bits the slot index is taken from, so that keys which
 * differ only high up (pointers, offsets) spread as well as counters do. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_bytes(const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    size_t i;

    for (i = 0; i < len; i++)
        h = (h ^ (uint8_t)key[i]) * 0x100000001b3ull;
    return mix(h);
}

/* The smallest power-of-two capacity (at least 16) that holds n keys at half load; 0 when
 * its bytes would not fit in a size_t. */
static size_t capacity_for(size_t n, size_t slot_size)
{
    size_t c = 16;

    while (c / 2 < n) {
        if (c > SIZE_MAX / 2 / slot_size)
            return 0;
        c *= 2;
    }
    return c;
}

/* ---- strings ---- */

static struct ckpt_strmap_slot *str_probe(struct ckpt_strmap_slot *slots, size_t cap, const char *key, size_t len,
                                          uint64_t hash)
{
    size_t j;

    for (j = (size_t)hash & (cap - 1); slots[j].key; j = (j + 1) & (cap - 1))
        if (slots[j].hash == hash && slots[j].len == len && memcmp(slots[j].key, key, len) == 0)
            break;
    return &slots[j];
}

static int str_resize(ckpt_strmap *m, size_t cap)
{
    struct ckpt_strmap_slot *slots = calloc(cap, sizeof *slots);
    size_t i;

    if (!slots)
        return ckpt_error_oom();
    for (i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            *str_probe(slots, cap, m->slots[i].key, m->slots[i].len, m->slots[i].hash) = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int ckpt_strmap_reserve(ckpt_strmap *m, size_t n)
{
    size_t cap = capacity_for(n, sizeof *m->slots);

    if (!cap)
        return ckpt_error_oom();
    return cap > m->cap ? str_resize(m, cap) : 0;
}

/* The key's slot, made room for: filled when the key is there, else empty. */
static int str_slot(ckpt_strmap *m, const char *key, size_t len, struct ckpt_strmap_slot **out)
{
    uint64_t hash = hash_bytes(key, len);
    int rc;

    if ((m->n + 1) * 2 > m->cap && (rc = ckpt_strmap_reserve(m, m->n + 1)) < 0)
        return rc;
    *out = str_probe(m->slots, m->cap, key, len, hash);
    (*out)->hash = hash;
    return 0;
}

int ckpt_strmap_add(ckpt_strmap *m, const char *key, size_t len, uint64_t val, uint64_t *existing)
{
    struct ckpt_strmap_slot *s;
    int rc;

    if (!key)
        key = "";
    if ((rc = str_slot(m, key, len, &s)) < 0)
        return rc;
    if (s->key) {
        if (existing)
            *existing = s->val;
        return 1;
    }
    s->key = key;
    s->len = len;
    s->val = val;
    m->n++;
    return 0;
}

int ckpt_strmap_set(ckpt_strmap *m, const char *key, size_t len, uint64_t val)
{
    struct ckpt_strmap_slot *s;
    int rc;

    if (!key)
        key = "";
    if ((rc = str_slot(m, key, len, &s)) < 0)
        return rc;
    if (!s->key) {
        s->key = key;
        s->len = len;
        m->n++;
    }
    s->val = val;
    return 0;
}

int ckpt_strmap_get(const ckpt_strmap *m, const char *key, size_t len, uint64_t *val)
{
    const struct ckpt_strmap_slot *s;

    if (!m->cap)
        return 0;
    if (!key)
        key = "";
    s = str_probe(m->slots, m->cap, key, len, hash_bytes(key, len));
    if (!s->key)
        return 0;
    if (val)
        *val = s->val;
    return 1;
}

void ckpt_strmap_dispose(ckpt_strmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->n = m->cap = 0;
}

/* ---- 64-bit keys ---- */

static struct ckpt_u64map_slot *u64_probe(struct ckpt_u64map_slot *slots, size_t cap, uint64_t key)
{
    size_t j;

    for (j = (size_t)mix(key) & (cap - 1); slots[j].key != U64_EMPTY && slots[j].key != key; j = (j + 1) & (cap - 1))
        ;
    return &slots[j];
}

/* The key's slot, made room for: holding the key, or empty. */
static int u64_slot(ckpt_u64map *m, uint64_t key, struct ckpt_u64map_slot **out)
{
    struct ckpt_u64map_slot *slots;
    size_t cap, i;

    if (key == U64_EMPTY)
        return ckpt_error_set(CKPT_EINVALID, "UINT64_MAX is not a key of a ckpt_u64map");
    if ((m->n + 1) * 2 > m->cap) {
        if (!(cap = capacity_for(m->n + 1, sizeof *slots)) || !(slots = malloc(cap * sizeof *slots)))
            return ckpt_error_oom();
        memset(slots, 0xff, cap * sizeof *slots);
        for (i = 0; i < m->cap; i++)
            if (m->slots[i].key != U64_EMPTY)
                *u64_probe(slots, cap, m->slots[i].key) = m->slots[i];
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    *out = u64_probe(m->slots, m->cap, key);
    return 0;
}

int ckpt_u64map_set(ckpt_u64map *m, uint64_t key, uint64_t val)
{
    struct ckpt_u64map_slot *s;
    int rc;

    if ((rc = u64_slot(m, key, &s)) < 0)
        return rc;
    if (s->key == U64_EMPTY) {
        s->key = key;
        m->n++;
    }
    s->val = val;
    return 0;
}

int ckpt_u64set_add(ckpt_u64map *s, uint64_t key)
{
    struct ckpt_u64map_slot *slot;
    int rc;

    if ((rc = u64_slot(s, key, &slot)) < 0)
        return rc;
    if (slot->key != U64_EMPTY)
        return 0;
    slot->key = key;
    slot->val = 0;
    s->n++;
    return 1;
}

int ckpt_u64map_get(const ckpt_u64map *m, uint64_t key, uint64_t *val)
{
    const struct ckpt_u64map_slot *s;

    if (!m->cap || key == U64_EMPTY)
        return 0;
    s = u64_probe(m->slots, m->cap, key);
    if (s->key == U64_EMPTY)
        return 0;
    if (val)
        *val = s->val;
    return 1;
}

void ckpt_u64map_dispose(ckpt_u64map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->n = m->cap = 0;
}
