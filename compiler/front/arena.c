/* arena.c — chunked bump allocator (see arena.h). */
#include "arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Chunk {
    struct Chunk *next;
    size_t used, size;
    max_align_t data[];
} Chunk;

struct Arena {
    Chunk *head;
};

static void out_of_memory(void)
{
    fputs("llmc: error: out of memory\n", stderr);
    exit(2);
}

void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) out_of_memory();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) out_of_memory();
    return p;
}

void *xrealloc(void *p, size_t size)
{
    p = realloc(p, size ? size : 1);
    if (!p) out_of_memory();
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

Arena *arena_new(void)
{
    return xcalloc(1, sizeof(Arena));
}

void arena_free(Arena *a)
{
    if (!a) return;
    for (Chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

void *arena_alloc(Arena *a, size_t size)
{
    size_t align = sizeof(max_align_t);
    size = (size + align - 1) / align * align;
    Chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t want = size > 64 * 1024 ? size : 64 * 1024;
        c = xmalloc(sizeof(Chunk) + want);
        c->next = a->head;
        c->used = 0;
        c->size = want;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *arena_strdup(Arena *a, const char *s)
{
    return arena_strndup(a, s, strlen(s));
}

char *arena_printf(Arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = arena_alloc(a, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void ptrvec_push(Arena *a, PtrVec *v, void *item)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 8;
        void **items = arena_alloc(a, sizeof(void *) * (size_t)cap);
        if (v->n) memcpy(items, v->items, sizeof(void *) * (size_t)v->n);
        v->items = items;
        v->cap = cap;
    }
    v->items[v->n++] = item;
}
