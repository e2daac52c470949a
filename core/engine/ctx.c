/* The step context: an arena for activations (arena.c), the autograd
 * tape, the RNG, and what plugins published during the step (extra losses,
 * statistics). Everything allocated here dies at ast_ctx_reset; the
 * backward pass hands each gradient back to the arena as soon as the tape
 * is done with it, so gradients reuse each other's memory. */
#include <stdlib.h>
#include <string.h>

#include "base/crash.h"
#include "engine/arena.h"
#include "engine/ctx_internal.h"
#include "engine/profile.h"

#define MAX_LOSSES 64
#define MAX_SCHEDULED 16

struct ast_ctx {
    ast_arena arena; /* tensor data and gradients, on the backend's buffers; the backend also runs the ops */
    ast_arena host;  /* ast_alloc's memory when the backend is a device (else unused: arena serves both) */
    ast_node *tape;
    size_t tape_n, tape_cap;
    unsigned char *frees_grad; /* [tape_cap]: see frees_grad_pass */
    ast_rng rng;
    ast_key_table *keys;  /* kernels' keys (ast_ctx_key), made at the first draw */
    int64_t loose_draws;  /* draws through host->rng_*, which a graph cannot replay */
    int training, grad_enabled;
    int quiet; /* nobody observes the step's statistics (ast_ctx_set_stats) */
    ast_precision precision; /* of linear, matmul and bmm (ops_linalg.c) */
    const char *loss_names[MAX_LOSSES];
    ast_tensor *losses[MAX_LOSSES];
    int n_losses;
    ast_stat *stats;
    int n_stats, stats_cap;
    /* Pinned blocks that device results are copied into (ast_ctx_read_later):
     * carved in the same order every step from block 0, never moved nor
     * freed before the context, so a captured step's copies keep writing
     * where the host reads them. */
    struct {
        void **blocks;
        size_t *bytes;
        int n, at;
        size_t used;
    } readback;
    struct {
        char name[48];
        float value;
    } scheduled[MAX_SCHEDULED];
    int n_scheduled;
    ast_profile *profile; /* ALPHAST_PROFILE=1, else NULL */
};

ast_ctx *ast_ctx_new(uint64_t seed) { return ast_ctx_new_on(ast_backend_cpu(), seed); }

ast_ctx *ast_ctx_new_on(const ast_backend *b, uint64_t seed)
{
    ast_ctx *c = ast_xcalloc(1, sizeof *c);
    ast_arena_init(&c->arena, b);
    if (b->memory != AST_MEM_HOST) ast_arena_init(&c->host, ast_backend_cpu());
    c->grad_enabled = 1;
    c->profile = ast_profile_from_env();
    ast_rng_seed(&c->rng, seed);
    return c;
}

void ast_ctx_free(ast_ctx *c)
{
    if (!c) return;
    if (c->profile) ast_profile_print(c->profile, stderr, c->arena.peak);
    free(c->profile);
    ast_arena_free(&c->arena);
    if (c->host.backend) ast_arena_free(&c->host);
    ast_keys_free(c->keys);
    free(c->tape);
    free(c->frees_grad);
    free(c->stats);
    for (int i = 0; i < c->readback.n; i++) c->arena.backend->host_free(c->arena.backend, c->readback.blocks[i]);
    free(c->readback.blocks), free(c->readback.bytes);
    free(c);
}

void ast_ctx_reset(ast_ctx *c)
{
    ast_arena_reset(&c->arena);
    if (c->host.backend) ast_arena_reset(&c->host);
    c->tape_n = 0;
    if (c->profile) ast_profile_step(c->profile, 0);
    c->n_losses = 0;
    c->n_stats = 0;
    c->readback.at = 0, c->readback.used = 0;
}

void ast_ctx_set_training(ast_ctx *c, int training) { c->training = training; }
void ast_ctx_set_grad(ast_ctx *c, int enabled) { c->grad_enabled = enabled; }
void ast_ctx_set_precision(ast_ctx *c, ast_precision p)
{
    char why[256];
    /* A device's backend has its own bf16 GEMMs (cuBLAS on the GPU's tensor
     * cores); the CPU needs oneDNN and a CPU with bf16 instructions. */
    AST_ASSERT(p != AST_PRECISION_BF16 || c->arena.backend->memory != AST_MEM_HOST || ast_bf16_supported(why, sizeof why),
               "bf16 precision: %s", why);
    c->precision = p;
}
ast_precision ast_ctx_precision(const ast_ctx *c) { return c->precision; }
ast_rng *ast_ctx_rng(ast_ctx *c) { return &c->rng; }

uint64_t ast_ctx_key(ast_ctx *c, const uint64_t **at)
{
    if (!c->keys) c->keys = ast_keys_new(c->arena.backend);
    return ast_keys_draw(c->keys, &c->rng, at);
}

ast_rng *ast_ctx_rng_loose(ast_ctx *c)
{
    c->loose_draws++;
    return &c->rng;
}

int64_t ast_ctx_loose_draws(const ast_ctx *c) { return c->loose_draws; }
int64_t ast_ctx_keys_drawn(const ast_ctx *c) { return c->keys ? c->keys->n : 0; }

ast_key_table *ast_ctx_take_keys(ast_ctx *c)
{
    ast_key_table *k = c->keys;
    c->keys = NULL;
    return k;
}

void ast_ctx_take_arena(ast_ctx *c, ast_arena *to) { ast_arena_hand_over(&c->arena, to); }
const ast_backend *ast_ctx_backend(const ast_ctx *c) { return c->arena.backend; }
size_t ast_ctx_arena_used(const ast_ctx *c) { return c->arena.used; }
size_t ast_ctx_arena_peak(const ast_ctx *c) { return c->arena.peak; }
int ast_training(const ast_ctx *c) { return c->training; }
void ast_ctx_set_stats(ast_ctx *c, int wanted) { c->quiet = !wanted; }
int ast_ctx_stats_wanted(const ast_ctx *c) { return !c->quiet; }
int ast_grad_enabled(const ast_ctx *c) { return c->grad_enabled; }

/* Host memory: the arena itself on the CPU, the host arena beside a device's. */
static ast_arena *host_arena(ast_ctx *c) { return c->host.backend ? &c->host : &c->arena; }

void *ast_alloc_uninit(ast_ctx *c, size_t bytes) { return ast_arena_take(host_arena(c), bytes); }
void *ast_data_alloc_uninit(ast_ctx *c, size_t bytes) { return ast_arena_take(&c->arena, bytes); }

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

void *ast_data_alloc(ast_ctx *c, size_t bytes)
{
    void *p = ast_data_alloc_uninit(c, bytes);
    c->arena.backend->zero(c->arena.backend, p, bytes);
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
        t->grad = ast_data_alloc_uninit(c, (size_t)t->size * sizeof(float));
        *fresh = 1;
    }
    return t->grad;
}

float *ast_grad(ast_ctx *c, ast_tensor *t)
{
    if (!t || !(t->flags & AST_REQUIRES_GRAD)) return NULL;
    if (!t->grad) t->grad = ast_data_alloc(c, (size_t)t->size * sizeof(float));
    return t->grad;
}

/* A device runs its kernels asynchronously: with the profile on, the host
 * waits for them at every mark, so each op is charged its own device time. */
static void profile_sync(ast_ctx *c)
{
    if (c->profile && c->arena.backend->memory != AST_MEM_HOST) c->arena.backend->synchronize(c->arena.backend);
}

void ast_record(ast_ctx *c, const ast_node *n)
{
    if (!ast_needs_grad(c, n->in, n->n_in)) {
        /* Not on the tape: an op on data alone in a training step, or any
         * op of a pass with grad off, which the profile counts apart. */
        profile_sync(c);
        if (c->profile && c->grad_enabled) ast_profile_forward(c->profile, n->op, c->arena.requested);
        else if (c->profile) ast_profile_inference(c->profile, n->op, c->arena.requested);
        return;
    }
    AST_ASSERT(n->backward && n->out, "op %s recorded without backward or output", n->op);
    if (c->tape_n == c->tape_cap) {
        c->tape_cap = c->tape_cap ? 2 * c->tape_cap : 256;
        c->tape = ast_xrealloc(c->tape, c->tape_cap * sizeof *c->tape);
        c->frees_grad = ast_xrealloc(c->frees_grad, c->tape_cap);
    }
    c->tape[c->tape_n++] = *n;
    n->out->flags |= AST_REQUIRES_GRAD;
    profile_sync(c);
    if (c->profile) ast_profile_forward(c->profile, n->op, c->arena.requested);
}


/* A tensor flag of the engine's own (plugin.h's flags use the low bits),
 * set only while frees_grad_pass runs. */
#define TAPE_SEEN (1u << 31)

static void mark_seen(ast_tensor *t, int seen)
{
    if (t) t->flags = seen ? t->flags | TAPE_SEEN : t->flags & ~TAPE_SEEN;
}

/* Which nodes may hand their output's gradient back to the arena once
 * their backward has run: those where the output first appears on the tape.
 * Every later node that reads or adds into it runs its backward earlier,
 * so nothing touches that gradient again. Not a node whose output appeared
 * before, as an input (an op writing into its input: the gradient is the
 * input's too) or as an earlier node's output (MoE's combine nodes add
 * into one shared output: the earliest of them frees it). */
static void frees_grad_pass(ast_ctx *c)
{
    for (size_t i = 0; i < c->tape_n; i++) {
        ast_node *n = &c->tape[i];
        for (int k = 0; k < n->n_in; k++) mark_seen(n->in[k], 1);
        c->frees_grad[i] = !(n->out->flags & TAPE_SEEN);
        mark_seen(n->out, 1);
    }
    for (size_t i = 0; i < c->tape_n; i++) {
        for (int k = 0; k < c->tape[i].n_in; k++) mark_seen(c->tape[i].in[k], 0);
        mark_seen(c->tape[i].out, 0);
    }
}

static void release_output_grad(ast_ctx *c, const ast_node *n)
{
    ast_tensor *y = n->out;
    if (!y->grad || (y->flags & AST_PARAM)) return;
    ast_arena_give_back(&c->arena, y->grad, (size_t)y->size * sizeof(float));
    y->grad = NULL;
}

/* The backward pass from out, seeded with dL/dout = seed (backend memory). */
static void backward_from(ast_ctx *c, ast_tensor *out, const float *seed)
{
    float *g = ast_grad(c, out);
    if (!g) return; /* nothing on the tape leads to a parameter */
    c->arena.backend->accumulate(c->arena.backend, g, seed, out->size);
    frees_grad_pass(c);
    for (size_t i = c->tape_n; i-- > 0;) {
        const ast_node *n = &c->tape[i];
        if (!n->out->grad) continue;
        profile_sync(c);
        double t0 = c->profile ? ast_profile_now() : 0.0;
        size_t asked = c->arena.requested;
        ast_crash_scope saved;
        ast_crash_enter(&saved, "backward of op", n->op, NULL, -1);
        n->backward(c, n);
        ast_crash_leave(&saved);
        if (c->frees_grad[i]) release_output_grad(c, n);
        profile_sync(c);
        if (c->profile) ast_profile_backward(c->profile, n->op, ast_profile_now() - t0, c->arena.requested - asked);
    }
    if (c->profile) ast_profile_mark(c->profile, c->arena.requested);
}

void ast_backward_seed(ast_ctx *c, ast_tensor *out, const float *dout)
{
    const ast_backend *b = c->arena.backend;
    float *seed = ast_data_alloc_uninit(c, (size_t)out->size * sizeof(float));
    b->to_backend(b, seed, dout, (size_t)out->size * sizeof(float));
    backward_from(c, out, seed);
}

/* The seed 1 is made on the backend, not copied from the host, so a step
 * whose data stays there can be captured (graph.h). */
void ast_backward(ast_ctx *c, ast_tensor *loss)
{
    AST_ASSERT(loss->size == 1, "backward needs a scalar loss, got %lld elements", (long long)loss->size);
    backward_from(c, loss, ast_affine(c, ast_zeros(c, 1, (int64_t[]){1}), 0.0f, 1.0f)->data);
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

#define READBACK_BLOCK ((size_t)64 << 10)

/* `bytes` of the next pinned block with room, in carving order. */
static void *readback_take(ast_ctx *c, size_t bytes)
{
    const ast_backend *b = c->arena.backend;
    bytes = (bytes + 63) & ~(size_t)63;
    while (c->readback.at < c->readback.n && c->readback.used + bytes > c->readback.bytes[c->readback.at])
        c->readback.at++, c->readback.used = 0;
    if (c->readback.at == c->readback.n) {
        int n = ++c->readback.n;
        size_t size = bytes > READBACK_BLOCK ? bytes : READBACK_BLOCK;
        c->readback.blocks = ast_xrealloc(c->readback.blocks, (size_t)n * sizeof *c->readback.blocks);
        c->readback.bytes = ast_xrealloc(c->readback.bytes, (size_t)n * sizeof *c->readback.bytes);
        c->readback.blocks[n - 1] = b->host_alloc(b, size);
        AST_ASSERT(c->readback.blocks[n - 1], "out of pinned host memory (%zu bytes for the step's results)", size);
        c->readback.bytes[n - 1] = size, c->readback.used = 0;
    }
    void *p = (char *)c->readback.blocks[c->readback.at] + c->readback.used;
    c->readback.used += bytes;
    return p;
}

const void *ast_ctx_read_later(ast_ctx *c, const void *src, size_t bytes)
{
    const ast_backend *b = c->arena.backend;
    if (b->memory == AST_MEM_HOST) return src;
    void *dst = readback_take(c, bytes);
    b->to_pinned(b, dst, src, bytes);
    return dst;
}

static void stat_append(ast_ctx *c, const char *name, int layer, int n, const float *values)
{
    if (c->n_stats == c->stats_cap) {
        c->stats_cap = c->stats_cap ? 2 * c->stats_cap : 64;
        c->stats = ast_xrealloc(c->stats, (size_t)c->stats_cap * sizeof *c->stats);
    }
    size_t len = strlen(name) + 1;
    c->stats[c->n_stats++] = (ast_stat){memcpy(ast_alloc(c, len), name, len), layer, n, values};
}

void ast_publish_stat(ast_ctx *c, const char *name, int layer, const float *values, int n)
{
    float *copy = ast_alloc(c, (size_t)n * sizeof(float));
    memcpy(copy, values, (size_t)n * sizeof(float));
    stat_append(c, name, layer, n, copy);
}

void ast_publish_stat_tensor(ast_ctx *c, const char *name, int layer, const ast_tensor *t)
{
    if (t->memory == AST_MEM_HOST) return ast_publish_stat(c, name, layer, t->data, (int)t->size);
    stat_append(c, name, layer, (int)t->size, ast_ctx_read_later(c, t->data, (size_t)t->size * sizeof(float)));
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
