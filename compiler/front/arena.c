/* arena.c — chunked bump allocator (see arena.h). */
#include "arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Chunks form a list, newest first; only the head is bumped. When an
 * allocation does not fit, a new head is started and the old one's tail
 * stays unused: at most one allocation's worth per 64 KiB chunk. */
typedef struct Chunk {
    struct Chunk *next;
    size_t used, size;          /* bytes of data[] handed out, and its capacity */
    max_align_t data[];         /* starts aligned for any type; sizes are rounded to it */
} Chunk;

struct Arena {
    Chunk *head;
};

/* The compiler has no use for a partial plan: running out of memory ends it,
 * with the exit status of a file that cannot be written (docs/llmc.1). */
static void out_of_memory(void)
{
    fputs("llmc: error: out of memory\n", stderr);
    exit(2);
}

/* A size of 0 asks for 1 byte: malloc(0) may return NULL, which would read
 * as out of memory. */
void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) out_of_memory();
    return p;
}

/* As xmalloc: a zero count or size asks for one byte, so NULL only ever means out of memory. */
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

/* Every chunk, then the handle: an arena's allocations all end together, none is freed alone. */
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
    /* rounded up to max_align_t, so the next allocation starts aligned too */
    size_t align = sizeof(max_align_t);
    size = (size + align - 1) / align * align;
    Chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        /* 64 KiB holds a typical plan's AST in a few chunks; a larger
         * request gets a chunk of its own size */
        size_t want = size > 64 * 1024 ? size : 64 * 1024;
        c = xmalloc(sizeof(Chunk) + want);
        c->next = a->head;
        c->used = 0;
        c->size = want;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    memset(p, 0, size);   /* zeroed: AST and plan structs rely on 0/NULL defaults */
    return p;
}

/* S need not be NUL-terminated: a token's text points into the source buffer, N bytes long. */
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

/* Formatted twice: once to measure, once into the arena (a va_list is
 * used up by the first pass, hence va_start again). */
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

/* Doubling into a fresh arena block: the old block is not freed (arenas
 * free only as a whole), so a vector of n items leaves about n pointers of
 * garbage behind, which is fine for the AST's short lists. */
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
