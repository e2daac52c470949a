/* The step arena: chunks of a backend's memory carved in order, and the
 * spans handed back during the step, reused best fit before the chunks
 * grow. Everything dies at reset, so a training step costs no malloc/free
 * once the arena has grown to the step's size. */
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#define ARENA_MIN_CHUNK ((size_t)16 << 20)
#define ARENA_ALIGN 64

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif

/* ASan's manual poisoning: a read or write through a pointer to a span
 * given back is reported where it happens (use-after-poison). */
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif
/* Only host memory has ASan's shadow; a device's is left alone. */
#define ON_HOST(a) ((a)->backend->memory == AST_MEM_HOST)

struct arena_chunk {
    arena_chunk *prev;
    size_t cap, used;
    unsigned char *base;
};

static arena_chunk *chunk_new(const ast_backend *b, size_t cap, arena_chunk *prev)
{
    arena_chunk *k = ast_xmalloc(sizeof *k);
    k->prev = prev;
    k->cap = cap;
    k->used = 0;
    k->base = b->buffer_alloc(b, cap);
    if (!k->base) {
        fprintf(stderr, "alphast: out of memory growing the step arena to %zu bytes (%s)\n", cap, b->name);
        exit(70);
    }
    return k;
}

static void free_chunks(const ast_backend *b, arena_chunk *k)
{
    while (k) {
        arena_chunk *prev = k->prev;
        b->buffer_free(b, k->base);
        free(k);
        k = prev;
    }
}

void ast_arena_init(ast_arena *a, const ast_backend *b)
{
    memset(a, 0, sizeof *a);
    a->backend = b;
    a->top = chunk_new(b, ARENA_MIN_CHUNK, NULL);
}

void ast_arena_free(ast_arena *a)
{
    free_chunks(a->backend, a->top);
    free(a->spare);
}

void ast_arena_reset(ast_arena *a)
{
    /* Several chunks mean the step outgrew the arena: replace them by one
     * chunk big enough for the whole step, so the next step fits. */
    if (a->top->prev) {
        size_t total = 0;
        for (arena_chunk *k = a->top; k; k = k->prev) total += k->cap;
        free_chunks(a->backend, a->top);
        a->top = chunk_new(a->backend, total, NULL);
    }
    a->top->used = 0;
    a->used = 0;
    a->requested = 0;
    a->n_spare = 0; /* still poisoned: ast_arena_take unpoisons what it hands out */
}

void ast_arena_hand_over(ast_arena *a, ast_arena *to)
{
    *to = *a;
    to->spare = NULL, to->n_spare = to->spare_cap = 0;
    a->top = chunk_new(a->backend, ARENA_MIN_CHUNK, NULL);
    a->used = a->requested = a->n_spare = 0;
}

/* Every block starts on a cache line (and a vector's width). */
static size_t whole_lines(size_t bytes) { return (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

static void *bump(ast_arena *a, size_t need)
{
    if (a->top->used + need > a->top->cap) {
        size_t cap = a->top->cap * 2;
        a->top = chunk_new(a->backend, need > cap ? need : cap, a->top);
    }
    void *p = a->top->base + a->top->used;
    a->top->used += need;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return p;
}

static void remove_span(ast_arena *a, size_t i)
{
    memmove(a->spare + i, a->spare + i + 1, (a->n_spare - i - 1) * sizeof *a->spare);
    a->n_spare--;
}

/* The smallest given-back span that fits, cut from its start; NULL if none. */
static void *from_spare(ast_arena *a, size_t need)
{
    size_t best = a->n_spare;
    for (size_t i = 0; i < a->n_spare; i++)
        if (a->spare[i].bytes >= need && (best == a->n_spare || a->spare[i].bytes < a->spare[best].bytes)) best = i;
    if (best == a->n_spare) return NULL;
    arena_span *s = &a->spare[best];
    void *p = s->p;
    s->p += need;
    s->bytes -= need;
    if (!s->bytes) remove_span(a, best);
    return p;
}

void *ast_arena_take(ast_arena *a, size_t bytes)
{
    size_t need = whole_lines(bytes);
    a->requested += need;
    void *p = need ? from_spare(a, need) : NULL;
    if (!p) p = bump(a, need);
    if (ON_HOST(a)) UNPOISON(p, need);
#ifdef ALPHAST_POISON_UNINIT
    if (ON_HOST(a)) memset(p, 0xff, bytes); /* all-ones bits: a NaN in every float */
#endif
    return p;
}

/* Does [p, p + bytes) end where the top chunk's carving stops (and lie in it)? */
static int at_top(const arena_chunk *k, const unsigned char *p, size_t bytes)
{
    return p >= k->base && p + bytes == k->base + k->used;
}

/* A span at the end of the top chunk's carving goes back to the chunk
 * itself (and so do given-back spans that then end there), so a later
 * request of any size can have it. */
static int roll_back(ast_arena *a, unsigned char *p, size_t bytes)
{
    arena_chunk *k = a->top;
    if (!at_top(k, p, bytes)) return 0;
    k->used -= bytes;
    a->used -= bytes;
    while (a->n_spare) {
        arena_span *last = &a->spare[a->n_spare - 1];
        if (!at_top(k, last->p, last->bytes)) break;
        k->used -= last->bytes;
        a->used -= last->bytes;
        a->n_spare--;
    }
    return 1;
}

void ast_arena_give_back(ast_arena *a, void *ptr, size_t bytes)
{
    unsigned char *p = ptr;
    size_t n = whole_lines(bytes);
    if (!n) return;
    if (ON_HOST(a)) POISON(p, n);
    if (roll_back(a, p, n)) return;
    size_t i = a->n_spare; /* first span above p */
    while (i > 0 && a->spare[i - 1].p > p) i--;
    int joins_prev = i > 0 && a->spare[i - 1].p + a->spare[i - 1].bytes == p;
    int joins_next = i < a->n_spare && p + n == a->spare[i].p;
    if (joins_prev && joins_next) {
        a->spare[i - 1].bytes += n + a->spare[i].bytes;
        remove_span(a, i);
    } else if (joins_prev) {
        a->spare[i - 1].bytes += n;
    } else if (joins_next) {
        a->spare[i].p = p;
        a->spare[i].bytes += n;
    } else {
        if (a->n_spare == a->spare_cap) {
            a->spare_cap = a->spare_cap ? 2 * a->spare_cap : 64;
            a->spare = ast_xrealloc(a->spare, a->spare_cap * sizeof *a->spare);
        }
        memmove(a->spare + i + 1, a->spare + i, (a->n_spare - i) * sizeof *a->spare);
        a->spare[i] = (arena_span){p, n};
        a->n_spare++;
    }
}
