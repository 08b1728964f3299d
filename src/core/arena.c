/* Bump allocator: value trees, names and small arrays die together with their owner. */
#include <ckpt/sys/common.h>
#include <ckpt/value.h>

#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK_MIN (64u * 1024u)
#define ARENA_ALIGN 16u

typedef struct arena_block {
    struct arena_block *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} arena_block;

struct ckpt_arena {
    arena_block *head;
    size_t total;
};

int ckpt_arena_new(ckpt_arena **out)
{
    ckpt_arena *a = calloc(1, sizeof *a);
    if (!a)
        return ckpt_error_oom();
    *out = a;
    return 0;
}

void ckpt_arena_free(ckpt_arena *a)
{
    arena_block *b, *next;

    if (!a)
        return;
    for (b = a->head; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

void *ckpt_arena_alloc(ckpt_arena *a, size_t size)
{
    arena_block *b = a->head;
    size_t need, block_size;
    void *p;

    if (CKPT_ADD_OVERFLOWS(size, (size_t)(ARENA_ALIGN - 1), &need)) {
        ckpt_error_oom();
        return NULL;
    }
    need &= ~(size_t)(ARENA_ALIGN - 1);
    if (need == 0)
        need = ARENA_ALIGN;
    if (!b || b->size - b->used < need) {
        block_size = need > ARENA_BLOCK_MIN ? need : ARENA_BLOCK_MIN;
        if (block_size > SIZE_MAX - sizeof *b) {
            ckpt_error_oom();
            return NULL;
        }
        b = malloc(sizeof *b + block_size);
        if (!b) {
            ckpt_error_oom();
            return NULL;
        }
        b->used = 0;
        b->size = block_size;
        b->next = a->head;
        a->head = b;
    }
    p = b->data + b->used;
    b->used += need;
    a->total += need;
    memset(p, 0, need);
    return p;
}

char *ckpt_arena_strndup(ckpt_arena *a, const char *s, size_t len)
{
    size_t size;
    char *p;

    if (CKPT_ADD_OVERFLOWS(len, (size_t)1, &size)) {
        ckpt_error_oom();
        return NULL;
    }
    p = ckpt_arena_alloc(a, size);
    if (!p)
        return NULL;
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

size_t ckpt_arena_used(const ckpt_arena *a)
{
    return a->total;
}
