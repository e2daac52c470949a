/* The step context: an arena for activations, the autograd tape, the RNG,
 * and what plugins published during the step (extra losses, statistics).
 * Everything allocated here dies at ast_ctx_reset, so a training step
 * costs no malloc/free once the arena has grown to the step's size. */
#include <stdlib.h>
#include <string.h>

#include "base/crash.h"
#include "engine/backend.h"
#include "engine/profile.h"

#define ARENA_ALIGN 64
#define ARENA_MIN_CHUNK ((size_t)16 << 20)
#define MAX_LOSSES 64
#define MAX_SCHEDULED 16

typedef struct chunk {
    struct chunk *prev;
    size_t cap, used;
    unsigned char *base;
} chunk;

struct ast_ctx {
    const ast_backend *backend; /* owns the arena's buffers and runs the ops */
    chunk *top;
    size_t used, peak;
    ast_node *tape;
    size_t tape_n, tape_cap;
    ast_rng rng;
    int training, grad_enabled;
    const char *loss_names[MAX_LOSSES];
    ast_tensor *losses[MAX_LOSSES];
    int n_losses;
    ast_stat *stats;
    int n_stats, stats_cap;
    struct {
        char name[48];
        float value;
    } scheduled[MAX_SCHEDULED];
    int n_scheduled;
    ast_profile *profile; /* ALPHAST_PROFILE=1, else NULL */
};

static chunk *chunk_new(const ast_backend *b, size_t cap, chunk *prev)
{
    chunk *k = ast_xmalloc(sizeof *k);
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

ast_ctx *ast_ctx_new(uint64_t seed) { return ast_ctx_new_on(ast_backend_cpu(), seed); }

ast_ctx *ast_ctx_new_on(const ast_backend *b, uint64_t seed)
{
    ast_ctx *c = ast_xcalloc(1, sizeof *c);
    c->backend = b;
    c->top = chunk_new(b, ARENA_MIN_CHUNK, NULL);
    c->grad_enabled = 1;
    c->profile = ast_profile_from_env();
    ast_rng_seed(&c->rng, seed);
    return c;
}

static void free_chunks(const ast_backend *b, chunk *k)
{
    while (k) {
        chunk *prev = k->prev;
        b->buffer_free(b, k->base);
        free(k);
        k = prev;
    }
}

void ast_ctx_free(ast_ctx *c)
{
    if (!c) return;
    if (c->profile) ast_profile_print(c->profile, stderr);
    free(c->profile);
    free_chunks(c->backend, c->top);
    free(c->tape);
    free(c->stats);
    free(c);
}

void ast_ctx_reset(ast_ctx *c)
{
    /* Several chunks mean the step outgrew the arena: replace them by one
     * chunk big enough for the whole step, so the next step fits. */
    if (c->top->prev) {
        size_t total = 0;
        for (chunk *k = c->top; k; k = k->prev) total += k->cap;
        free_chunks(c->backend, c->top);
        c->top = chunk_new(c->backend, total, NULL);
    }
    c->top->used = 0;
    c->used = 0;
    c->tape_n = 0;
    if (c->profile) ast_profile_step(c->profile);
    c->n_losses = 0;
    c->n_stats = 0;
}

void ast_ctx_set_training(ast_ctx *c, int training) { c->training = training; }
void ast_ctx_set_grad(ast_ctx *c, int enabled) { c->grad_enabled = enabled; }
ast_rng *ast_ctx_rng(ast_ctx *c) { return &c->rng; }
const ast_backend *ast_ctx_backend(const ast_ctx *c) { return c->backend; }
size_t ast_ctx_arena_used(const ast_ctx *c) { return c->used; }
size_t ast_ctx_arena_peak(const ast_ctx *c) { return c->peak; }
int ast_training(const ast_ctx *c) { return c->training; }
int ast_grad_enabled(const ast_ctx *c) { return c->grad_enabled; }

void *ast_alloc_uninit(ast_ctx *c, size_t bytes)
{
    size_t need = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (c->top->used + need > c->top->cap) {
        size_t cap = c->top->cap * 2;
        c->top = chunk_new(c->backend, need > cap ? need : cap, c->top);
    }
    void *p = c->top->base + c->top->used;
    c->top->used += need;
    c->used += need;
    if (c->used > c->peak) c->peak = c->used;
#ifdef ALPHAST_POISON_UNINIT
    memset(p, 0xff, bytes); /* all-ones bits: a NaN in every float */
#endif
    return p;
}

static void zero_range(void *arg, int64_t lo, int64_t hi)
{
    memset((unsigned char *)arg + lo, 0, (size_t)(hi - lo));
}

void *ast_alloc(ast_ctx *c, size_t bytes)
{
    void *p = ast_alloc_uninit(c, bytes);
    ast_parallel_for((int64_t)bytes, (int64_t)1 << 20, zero_range, p);
    return p;
}

int ast_needs_grad(const ast_ctx *c, ast_tensor *const *in, int n)
{
    if (!c->grad_enabled) return 0;
    for (int i = 0; i < n; i++)
        if (in[i] && (in[i]->flags & AST_REQUIRES_GRAD)) return 1;
    return 0;
}

float *ast_grad_fresh(ast_ctx *c, ast_tensor *t, int *fresh)
{
    *fresh = 0;
    if (!t || !(t->flags & AST_REQUIRES_GRAD)) return NULL;
    if (!t->grad) {
        t->grad = ast_alloc_uninit(c, (size_t)t->size * sizeof(float));
        *fresh = 1;
    }
    return t->grad;
}

float *ast_grad(ast_ctx *c, ast_tensor *t)
{
    if (!t || !(t->flags & AST_REQUIRES_GRAD)) return NULL;
    if (!t->grad) t->grad = ast_alloc(c, (size_t)t->size * sizeof(float));
    return t->grad;
}

void ast_record(ast_ctx *c, const ast_node *n)
{
    if (!ast_needs_grad(c, n->in, n->n_in)) return;
    AST_ASSERT(n->backward && n->out, "op %s recorded without backward or output", n->op);
    if (c->tape_n == c->tape_cap) {
        c->tape_cap = c->tape_cap ? 2 * c->tape_cap : 256;
        c->tape = ast_xrealloc(c->tape, c->tape_cap * sizeof *c->tape);
    }
    c->tape[c->tape_n++] = *n;
    n->out->flags |= AST_REQUIRES_GRAD;
    if (c->profile) ast_profile_forward(c->profile, n->op);
}

void ast_backward(ast_ctx *c, ast_tensor *loss)
{
    AST_ASSERT(loss->size == 1, "backward needs a scalar loss, got %lld elements", (long long)loss->size);
    const float one = 1.0f;
    ast_backward_seed(c, loss, &one);
}

void ast_backward_seed(ast_ctx *c, ast_tensor *out, const float *dout)
{
    float *g = ast_grad(c, out);
    if (!g) return; /* nothing on the tape leads to a parameter */
    for (int64_t i = 0; i < out->size; i++) g[i] += dout[i];
    for (size_t i = c->tape_n; i-- > 0;) {
        const ast_node *n = &c->tape[i];
        if (!n->out->grad) continue;
        double t0 = c->profile ? ast_profile_now() : 0.0;
        ast_crash_scope saved;
        ast_crash_enter(&saved, "backward of op", n->op, NULL, -1);
        n->backward(c, n);
        ast_crash_leave(&saved);
        if (c->profile) ast_profile_backward(c->profile, n->op, ast_profile_now() - t0);
    }
    if (c->profile) ast_profile_mark(c->profile);
}

void ast_add_loss(ast_ctx *c, const char *name, ast_tensor *scalar)
{
    AST_ASSERT(scalar->size == 1, "loss %s must be a scalar", name);
    AST_ASSERT(c->n_losses < MAX_LOSSES, "more than %d named losses in one step", MAX_LOSSES);
    size_t len = strlen(name) + 1;
    c->loss_names[c->n_losses] = memcpy(ast_alloc(c, len), name, len);
    c->losses[c->n_losses++] = scalar;
}

int ast_ctx_n_losses(const ast_ctx *c) { return c->n_losses; }
const char *ast_ctx_loss_name(const ast_ctx *c, int i) { return c->loss_names[i]; }
ast_tensor *ast_ctx_loss(const ast_ctx *c, int i) { return c->losses[i]; }

void ast_publish_stat(ast_ctx *c, const char *name, int layer, const float *values, int n)
{
    if (c->n_stats == c->stats_cap) {
        c->stats_cap = c->stats_cap ? 2 * c->stats_cap : 64;
        c->stats = ast_xrealloc(c->stats, (size_t)c->stats_cap * sizeof *c->stats);
    }
    size_t len = strlen(name) + 1;
    float *copy = ast_alloc(c, (size_t)n * sizeof(float));
    memcpy(copy, values, (size_t)n * sizeof(float));
    c->stats[c->n_stats++] = (ast_stat){memcpy(ast_alloc(c, len), name, len), layer, n, copy};
}

int ast_ctx_n_stats(const ast_ctx *c) { return c->n_stats; }
const ast_stat *ast_ctx_stats(const ast_ctx *c) { return c->stats; }

void ast_ctx_set_scheduled(ast_ctx *c, const char *name, float value)
{
    int i = 0;
    while (i < c->n_scheduled && strcmp(c->scheduled[i].name, name)) i++;
    AST_ASSERT(i < MAX_SCHEDULED, "more than %d scheduled values", MAX_SCHEDULED);
    AST_ASSERT(strlen(name) < sizeof c->scheduled[i].name, "scheduled value name too long: %s", name);
    if (i == c->n_scheduled) strcpy(c->scheduled[c->n_scheduled++].name, name);
    c->scheduled[i].value = value;
}

float ast_ctx_scheduled(const ast_ctx *c, const char *name, float fallback)
{
    for (int i = 0; i < c->n_scheduled; i++)
        if (!strcmp(c->scheduled[i].name, name)) return c->scheduled[i].value;
    return fallback;
}
