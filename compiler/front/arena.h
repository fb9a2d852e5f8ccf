/* arena.h — bump allocation for the front end: the AST, the typed plan and
 * their strings live in one arena and are freed together. */
#ifndef LLMC_ARENA_H
#define LLMC_ARENA_H

#include <stddef.h>

typedef struct Arena Arena;

Arena *arena_new(void);
void arena_free(Arena *);
/* Zeroed memory; aborts with a message when the system is out of memory. */
void *arena_alloc(Arena *, size_t size);
char *arena_strndup(Arena *, const char *s, size_t n);
char *arena_strdup(Arena *, const char *s);
char *arena_printf(Arena *, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A growable array of pointers whose storage is in the arena. */
typedef struct {
    void **items;
    int n, cap;
} PtrVec;

void ptrvec_push(Arena *, PtrVec *, void *item);

/* Allocation helpers for code outside arenas: abort on out-of-memory. */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
char *xstrdup(const char *s);

#endif
