/* The GEMMs of linear, matmul and bmm in bf16 (training.precision:
 * bf16-mixed): both operands rounded to bfloat16, products accumulated in
 * float32 into a float32 C, as PyTorch's CPU autocast runs them (its
 * output is then rounded to bf16 as well; ours stays float32). oneDNN's
 * matmul does the arithmetic with AVX512-BF16 or AMX instructions; a CPU
 * with neither is refused rather than emulated (ast_bf16_supported).
 *
 * Threads: as in gemm.c, the GEMM is cut into one part per thread of
 * alphast's pool, and each part is one oneDNN matmul on that thread alone.
 * Debian's oneDNN runs on OpenMP: every thread that creates or runs a
 * primitive first sets its OpenMP team to one thread, so oneDNN never
 * starts threads of its own inside a pool worker. Primitives are cached by
 * shape (creating one costs ~0.3 ms, more than most of these GEMMs) and
 * run with a scratchpad per thread, which is what lets one primitive run
 * on several threads at once (oneDNN's "user" scratchpad mode). */
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
#define ALIGN 64

/* What decides a primitive: one part's GEMM. beta is 0 with a bias. */
typedef struct prim_key {
    int ta, tb, m, n, k, lda, ldb, ldc, bias;
    float beta;
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
    char info[256]; /* what runs the GEMMs, or why nothing can */
    int ok;
    pthread_mutex_t lock; /* the cache */
    prim *buckets[CACHE_BUCKETS];
    int cached;
} lib = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

/* Per thread: its stream and scratchpad, and (on the thread that calls
 * ast_gemm_bf16) the bf16 copies of the operands. Kept for the thread's
 * life: the pool's threads never end, and the sizes stop growing after the
 * first step. */
static _Thread_local struct {
    dnnl_stream_t stream;
    void *scratch;
    size_t scratch_cap;
    void *operands;
    size_t operands_cap;
} tls;

static void lib_init(void)
{
    const dnnl_version_t *v = dnnl_version();
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const char *isa_name = dnnl_cpu_isa2str(isa);
    if (!strncmp(isa_name, "cpu_isa_", 8)) isa_name += 8;
    if ((isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16) {
        snprintf(lib.info, sizeof lib.info, "this CPU has neither AVX512-BF16 nor AMX (oneDNN %d.%d.%d's best "
                 "instruction set here is %s; ONEDNN_MAX_CPU_ISA can lower it), and bf16 would only be emulated",
                 v->major, v->minor, v->patch, isa_name);
        return;
    }
    if (dnnl_engine_create(&lib.engine, dnnl_cpu, 0) != dnnl_success) {
        snprintf(lib.info, sizeof lib.info, "oneDNN %d.%d.%d could not create its CPU engine", v->major, v->minor,
                 v->patch);
        return;
    }
    snprintf(lib.info, sizeof lib.info, "oneDNN %d.%d.%d, %s", v->major, v->minor, v->patch, isa_name);
    lib.ok = 1;
}

static int lib_ready(void)
{
    pthread_once(&lib.once, lib_init);
    return lib.ok;
}

int ast_bf16_supported(char *info, size_t n)
{
    int ok = lib_ready();
    snprintf(info, n, "%s", lib.info);
    return ok;
}

/* ---- float32 operands to bf16 --------------------------------------------- */

/* Rounds to nearest, ties to even, as vcvtneps2bf16 and PyTorch do; a NaN
 * stays a quiet NaN instead of rounding into infinity. */
static inline uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* A and B as stored (rows of cols with leading dimension ld) into dense
 * bf16 copies; the rows of both are one range of items for the pool. */
typedef struct convert_args {
    const float *src[2];
    uint16_t *dst[2];
    int64_t rows[2], cols[2], ld[2];
} convert_args;

static void convert_rows(void *arg, int64_t lo, int64_t hi)
{
    const convert_args *a = arg;
    for (int64_t r = lo; r < hi; r++) {
        int i = r >= a->rows[0];
        int64_t row = r - i * a->rows[0], cols = a->cols[i];
        const float *s = a->src[i] + row * a->ld[i];
        uint16_t *d = a->dst[i] + row * cols;
        for (int64_t j = 0; j < cols; j++) d[j] = to_bf16(s[j]);
    }
}

/* A buffer of at least `bytes`, 64-byte aligned, kept in *p / *cap. */
static void *grow(void **p, size_t *cap, size_t bytes)
{
    if (bytes > *cap) {
        free(*p);
        *cap = (bytes + ALIGN - 1) / ALIGN * ALIGN;
        *p = aligned_alloc(ALIGN, *cap);
        AST_ASSERT(*p, "out of memory for %zu bytes of bf16 GEMM buffers", *cap);
    }
    return *p;
}

/* ---- primitives, cached by shape -------------------------------------------- */

#define DNNL_CHECK(call)                                                                                          \
    do {                                                                                                          \
        dnnl_status_t s_ = (call);                                                                                \
        AST_ASSERT(s_ == dnnl_success, "oneDNN: %s failed (%s) for a bf16 matmul of [%d x %d] x [%d x %d]", #call, \
                   dnnl_status2str(s_), k->m, k->k, k->k, k->n);                                                  \
    } while (0)

/* op(A) [m, k], transposed: stored [k, m]. */
static void matrix_md(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans, dnnl_data_type_t type,
                      const prim_key *k)
{
    dnnl_dims_t dims = {rows, cols}, strides = {trans ? 1 : ld, trans ? ld : 1};
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides));
}

static prim *prim_new(const prim_key *k)
{
    prim *e = ast_xcalloc(1, sizeof *e);
    e->key = *k;
    matrix_md(&e->a, k->m, k->k, k->lda, k->ta, dnnl_bf16, k);
    matrix_md(&e->b, k->k, k->n, k->ldb, k->tb, dnnl_bf16, k);
    matrix_md(&e->c, k->m, k->n, k->ldc, 0, dnnl_f32, k);
    matrix_md(&e->bias, 1, k->n, k->n, 0, dnnl_f32, k);
    dnnl_matmul_desc_t md;
    DNNL_CHECK(dnnl_matmul_desc_init(&md, &e->a, &e->b, k->bias ? &e->bias : NULL, &e->c));
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (k->beta != 0.0f) { /* C = beta C + op(A) op(B), the sum in float32 */
        dnnl_post_ops_t po;
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_sum(po, k->beta));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
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
    *owned = e ? NULL : prim_new(k);
    return e ? e : *owned;
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

static void bf16_part(void *arg, int64_t lo, int64_t hi)
{
    const ast_gemm_args *g = arg;
    ast_gemm_part p = ast_gemm_part_of(g, lo, hi);
    thread_setup();
    const prim_key key = {g->ta, g->tb, p.m, p.n, g->k, g->lda, g->ldb, g->ldc, g->bias != NULL,
                          g->bias ? 0.0f : g->beta}, *k = &key;
    prim *owned;
    const prim *e = prim_get(k, &owned);
    dnnl_exec_arg_t args[5] = {
        {DNNL_ARG_SRC, wrap(&e->a, (const uint16_t *)g->a + p.a, k)},
        {DNNL_ARG_WEIGHTS, wrap(&e->b, (const uint16_t *)g->b + p.b, k)},
        {DNNL_ARG_DST, wrap(&e->c, g->c + p.c, k)},
    };
    int n = 3;
    if (e->scratch_bytes)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD,
                                      wrap(&e->scratch, grow(&tls.scratch, &tls.scratch_cap, e->scratch_bytes), k)};
    if (g->bias) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, wrap(&e->bias, g->bias + p.bias, k)};
    DNNL_CHECK(dnnl_primitive_execute(e->p, tls.stream, n, args));
    DNNL_CHECK(dnnl_stream_wait(tls.stream));
    for (int i = 0; i < n; i++) dnnl_memory_destroy(args[i].memory);
    prim_free(owned);
}

void ast_gemm_bf16(const ast_gemm_args *g)
{
    AST_ASSERT(lib_ready(), "bf16 GEMM: %s", lib.info);
    /* A is stored [m, k] ([k, m] transposed), B [k, n] ([n, k]). */
    int64_t ra = g->ta ? g->k : g->m, ca = g->ta ? g->m : g->k, rb = g->tb ? g->n : g->k, cb = g->tb ? g->k : g->n;
    int64_t a_elems = (ra * ca + ALIGN - 1) / ALIGN * ALIGN; /* B's copy starts aligned too */
    uint16_t *a16 = grow(&tls.operands, &tls.operands_cap, (size_t)(a_elems + rb * cb) * sizeof(uint16_t));
    convert_args cv = {{g->a, g->b}, {a16, a16 + a_elems}, {ra, rb}, {ca, cb}, {g->lda, g->ldb}};
    ast_parallel_for(ra + rb, ast_row_grain((ra * ca + rb * cb) / (ra + rb)), convert_rows, &cv);
    ast_gemm_args h = *g;
    h.a = cv.dst[0], h.b = cv.dst[1], h.lda = (int)ca, h.ldb = (int)cb;
    ast_gemm_split(&h, bf16_part);
}

#else

int ast_bf16_supported(char *info, size_t n)
{
    snprintf(info, n, "this alphast was built without oneDNN (install it with apt-get install libdnnl-dev, then run "
                      "configure and make again)");
    return 0;
}

#endif
