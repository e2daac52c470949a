/* oneDNN's matmul for the engine's GEMMs: float32 (gemm.c, where oneDNN is
 * the chosen library) and bf16 (gemm_bf16.c, which rounds the operands
 * first). This file owns what both share: the CPU engine, the primitives
 * cached by shape, and running one GEMM split over alphast's pool.
 *
 * Threads: as in gemm.c, the GEMM is cut into one part per thread of
 * alphast's pool, and each part is one oneDNN matmul on that thread alone.
 * Debian's oneDNN runs on OpenMP: every thread that creates or runs a
 * primitive first sets its OpenMP team to one thread, so oneDNN never
 * starts threads of its own inside a pool worker (bench_sgemm counts the
 * process's threads to show it). Primitives are cached by shape (creating
 * one costs ~0.3 ms, more than most of these GEMMs) and run with a
 * scratchpad per thread, which is what lets one primitive run on several
 * threads at once (oneDNN's "user" scratchpad mode). The parts and the
 * primitive chosen for each depend only on the shape, the thread count and
 * the CPU, so a GEMM gives the same bits on every run. */
#include <stdio.h>

#include "engine/gemm_internal.h"

#if AST_HAVE_ONEDNN
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#if DNNL_CPU_THREADING_RUNTIME != DNNL_RUNTIME_OMP && DNNL_CPU_THREADING_RUNTIME != DNNL_RUNTIME_SEQ
#error "alphast needs oneDNN built with OpenMP or sequential threading (Debian's libdnnl-dev is)"
#endif

#include "base/hash.h"

/* A shape seen this often is worth keeping; past it (many set sizes in one
 * evaluation) a primitive is made for the call and freed after it. */
#define CACHE_MAX 4096
#define CACHE_BUCKETS 1024

/* What decides a primitive: one part's GEMM. beta is 0 with a bias. */
typedef struct prim_key {
    int bf16, ta, tb, m, n, k, lda, ldb, ldc, bias;
    float alpha, beta;
} prim_key;

typedef struct prim {
    prim_key key;
    dnnl_primitive_t p;
    dnnl_memory_desc_t a, b, c, bias, scratch;
    size_t scratch_bytes;
    struct prim *next;
} prim;

static struct {
    pthread_once_t once;
    dnnl_engine_t engine;
    ast_onednn_info info;
    pthread_mutex_t lock; /* the cache */
    prim *buckets[CACHE_BUCKETS];
    int cached;
} lib = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

/* Primitives a thread used last, found without the cache's lock (the
 * gated attention's tiles run thousands of small GEMMs per step on every
 * thread at once). Cached primitives live as long as the process. */
#define RECENT 8

/* Per thread: its stream and scratchpad, kept for the thread's life (the
 * pool's threads never end, and the sizes stop growing after a step). */
static _Thread_local struct {
    dnnl_stream_t stream;
    void *scratch;
    size_t scratch_cap;
    const prim *recent[RECENT];
    unsigned next_recent;
} tls;

static void lib_init(void)
{
    const dnnl_version_t *v = dnnl_version();
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const char *isa_name = dnnl_cpu_isa2str(isa);
    if (!strncmp(isa_name, "cpu_isa_", 8)) isa_name += 8;
    ast_onednn_info *in = &lib.info;
    snprintf(in->version, sizeof in->version, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    snprintf(in->isa, sizeof in->isa, "%s", isa_name);
    in->avx512 = (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
    in->bf16 = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    if (dnnl_engine_create(&lib.engine, dnnl_cpu, 0) != dnnl_success) {
        snprintf(in->text, sizeof in->text, "%s could not create its CPU engine", in->version);
        in->avx512 = in->bf16 = 0;
        return;
    }
    snprintf(in->text, sizeof in->text, "%s, %s", in->version, in->isa);
    in->ok = 1;
}

const ast_onednn_info *ast_onednn(void)
{
    pthread_once(&lib.once, lib_init);
    return &lib.info;
}

void *ast_grow_aligned(void **p, size_t *cap, size_t bytes)
{
    if (bytes > *cap) {
        free(*p);
        *cap = (bytes + AST_GEMM_ALIGN - 1) / AST_GEMM_ALIGN * AST_GEMM_ALIGN;
        *p = aligned_alloc(AST_GEMM_ALIGN, *cap);
        AST_ASSERT(*p, "out of memory for %zu bytes of GEMM buffers", *cap);
    }
    return *p;
}

/* ---- primitives, cached by shape -------------------------------------------- */

#define DNNL_CHECK(call)                                                                                          \
    do {                                                                                                          \
        dnnl_status_t s_ = (call);                                                                                \
        AST_ASSERT(s_ == dnnl_success, "oneDNN: %s failed (%s) for a %s matmul of [%d x %d] x [%d x %d]", #call,  \
                   dnnl_status2str(s_), k->bf16 ? "bf16" : "float32", k->m, k->k, k->k, k->n);                    \
    } while (0)

/* op(A) [m, k], transposed: stored [k, m]. */
static void matrix_md(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans, dnnl_data_type_t type,
                      const prim_key *k)
{
    dnnl_dims_t dims = {rows, cols}, strides = {trans ? 1 : ld, trans ? ld : 1};
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides));
}

/* alpha as oneDNN's output scale, beta as a sum post-op (C = alpha op(A)
 * op(B) + beta C, the sum in float32). */
static dnnl_primitive_attr_t prim_attr(const prim_key *k)
{
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (k->alpha != 1.0f) DNNL_CHECK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha));
    if (k->beta != 0.0f) {
        dnnl_post_ops_t po;
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_sum(po, k->beta));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    return attr;
}

static prim *prim_new(const prim_key *k)
{
    prim *e = ast_xcalloc(1, sizeof *e);
    e->key = *k;
    dnnl_data_type_t in = k->bf16 ? dnnl_bf16 : dnnl_f32;
    matrix_md(&e->a, k->m, k->k, k->lda, k->ta, in, k);
    matrix_md(&e->b, k->k, k->n, k->ldb, k->tb, in, k);
    matrix_md(&e->c, k->m, k->n, k->ldc, 0, dnnl_f32, k);
    matrix_md(&e->bias, 1, k->n, k->n, 0, dnnl_f32, k);
    dnnl_matmul_desc_t md;
    DNNL_CHECK(dnnl_matmul_desc_init(&md, &e->a, &e->b, k->bias ? &e->bias : NULL, &e->c));
    dnnl_primitive_attr_t attr = prim_attr(k);
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &md, attr, lib.engine, NULL));
    dnnl_primitive_attr_destroy(attr);
    e->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = dnnl_memory_desc_get_size(&e->scratch);
    DNNL_CHECK(dnnl_primitive_create(&e->p, pd));
    dnnl_primitive_desc_destroy(pd);
    return e;
}

static void prim_free(prim *e)
{
    if (e) dnnl_primitive_destroy(e->p);
    free(e);
}

/* The cached primitive for k, made on first use; past CACHE_MAX one made
 * for this call alone, which *owned returns for the caller to free. */
static const prim *prim_get(const prim_key *k, prim **owned)
{
    *owned = NULL;
    for (int i = 0; i < RECENT; i++)
        if (tls.recent[i] && !memcmp(&tls.recent[i]->key, k, sizeof *k)) return tls.recent[i];
    prim **bucket = &lib.buckets[ast_fnv1a(AST_FNV_OFFSET, k, sizeof *k) % CACHE_BUCKETS];
    pthread_mutex_lock(&lib.lock);
    prim *e = *bucket;
    while (e && memcmp(&e->key, k, sizeof *k)) e = e->next;
    if (!e && lib.cached < CACHE_MAX) {
        e = prim_new(k);
        e->next = *bucket;
        *bucket = e;
        lib.cached++;
    }
    pthread_mutex_unlock(&lib.lock);
    if (!e) return *owned = prim_new(k);
    tls.recent[tls.next_recent++ % RECENT] = e;
    return e;
}

/* ---- one part on one thread ------------------------------------------------- */

static void thread_setup(void)
{
    if (tls.stream) return;
    /* This thread's OpenMP team: just itself, before it makes or runs a
     * primitive (which size their work by the team they see). */
    omp_set_num_threads(1);
    dnnl_status_t s = dnnl_stream_create(&tls.stream, lib.engine, dnnl_stream_default_flags);
    AST_ASSERT(s == dnnl_success, "oneDNN: no stream (%s)", dnnl_status2str(s));
}

/* oneDNN's memory objects only wrap the pointers; inputs are not written. */
static dnnl_memory_t wrap(const dnnl_memory_desc_t *md, const void *data, const prim_key *k)
{
    dnnl_memory_t m;
    DNNL_CHECK(dnnl_memory_create(&m, md, lib.engine, (void *)data));
    return m;
}

static void run_part(const ast_gemm_args *g, int bf16, int64_t lo, int64_t hi)
{
    ast_gemm_part p = ast_gemm_part_of(g, lo, hi);
    thread_setup();
    size_t size = bf16 ? sizeof(uint16_t) : sizeof(float);
    const prim_key key = {bf16, g->ta, g->tb, p.m, p.n, g->k, g->lda, g->ldb, g->ldc, g->bias != NULL,
                          g->alpha, g->bias ? 0.0f : g->beta}, *k = &key;
    prim *owned;
    const prim *e = prim_get(k, &owned);
    dnnl_exec_arg_t args[5] = {
        {DNNL_ARG_SRC, wrap(&e->a, (const char *)g->a + p.a * size, k)},
        {DNNL_ARG_WEIGHTS, wrap(&e->b, (const char *)g->b + p.b * size, k)},
        {DNNL_ARG_DST, wrap(&e->c, g->c + p.c, k)},
    };
    int n = 3;
    if (e->scratch_bytes)
        args[n++] = (dnnl_exec_arg_t){
            DNNL_ARG_SCRATCHPAD, wrap(&e->scratch, ast_grow_aligned(&tls.scratch, &tls.scratch_cap, e->scratch_bytes), k)};
    if (g->bias) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, wrap(&e->bias, g->bias + p.bias, k)};
    DNNL_CHECK(dnnl_primitive_execute(e->p, tls.stream, n, args));
    DNNL_CHECK(dnnl_stream_wait(tls.stream));
    for (int i = 0; i < n; i++) dnnl_memory_destroy(args[i].memory);
    prim_free(owned);
}

static void f32_part(void *arg, int64_t lo, int64_t hi) { run_part(arg, 0, lo, hi); }
static void bf16_part(void *arg, int64_t lo, int64_t hi) { run_part(arg, 1, lo, hi); }

void ast_gemm_onednn(ast_gemm_args *g, int bf16)
{
    AST_ASSERT(ast_onednn()->ok, "oneDNN GEMM: %s", lib.info.text);
    ast_gemm_split(g, bf16 ? bf16_part : f32_part);
}

#endif
