/* Routing in backend memory (ops.def's moe_* and noise_normal) on the CPU:
 * the plan's decisions against the rules the host routing follows (top-k,
 * slot-major candidates kept up to capacity, a stable sort by expert), the
 * noise of valid rows against the same rows compacted, the consumers'
 * values against direct loops and their gradients against finite
 * differences. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gradcheck.h"

/* The consumers are linear in each input (pick, gather, combine given the
 * other) or a GEMM: central differences carry float32 rounding of L / h
 * (~1e-5 at h = 1e-2) only. */
#define GRAD_TOL 1e-3

#define ASSERT_GRADS(r, what)                                                                              \
    cr_assert_lt((r).max_err, GRAD_TOL, "%s: input %d[%lld] analytic %g numeric %g", what, (r).worst_input, \
                 (long long)(r).worst_index, (r).analytic, (r).numeric)

/* Two sets of 7 tokens, the second with 3 padded; 5 experts, top-2. */
enum { T = 14, PER_SET = 7, E = 5, K = 2, P = T * K, D = 3, H = 4 };

/* A parameter of the test's store under a name of its own. */
static ast_tensor *named_input(ast_params *p, const char *what, int e, int ndim, const int64_t *shape)
{
    char name[32];
    snprintf(name, sizeof name, "%s.%d", what, e);
    return gc_input(p, name, ndim, shape, 1.0f);
}

static float valid_of(int t) { return t >= T - 3 ? 0.0f : 1.0f; }

typedef struct fixture {
    ast_params *p;
    ast_ctx *c;
    ast_tensor *logits, *valid, *plan;
} fixture;

static fixture make_plan(float capacity_factor)
{
    fixture f = {.p = ast_params_new(5), .c = ast_ctx_new(3)};
    f.logits = gc_input(f.p, "logits", 2, (int64_t[]){T, E}, 1.0f);
    float v[T];
    for (int t = 0; t < T; t++) v[t] = valid_of(t);
    f.valid = ast_tensor_from(f.c, 1, (int64_t[]){T}, v);
    f.plan = ast_moe_route(f.c, f.logits, f.valid, K, capacity_factor, PER_SET);
    return f;
}

static void free_fixture(fixture *f)
{
    ast_ctx_free(f->c);
    ast_params_free(f->p);
}

#define PLAN(f, at) ((f)->plan->data[at])

/* Each valid token's k choices are its largest logits, largest first. */
static void check_choices(const fixture *f)
{
    for (int t = 0; t < T; t++) {
        const float *row = f->logits->data + t * E;
        float prev = INFINITY;
        for (int s = 0; s < K; s++) {
            int e = (int)PLAN(f, AST_MOE_PLAN_EXPERT(P) + t * K + s);
            cr_assert(e >= 0 && e < E && row[e] <= prev, "token %d slot %d: expert %d", t, s, e);
            prev = row[e];
        }
        int larger = 0; /* experts not chosen but above the k-th choice */
        for (int e = 0; e < E; e++) larger += row[e] > prev;
        cr_assert_eq(larger, K - 1, "token %d: %d logits above its last choice", t, larger);
    }
}

/* Expert e's block lists its kept candidates in slot-major order, the
 * first min(load, capacity) of them; padded tokens keep none. */
static void check_sort(const fixture *f)
{
    int64_t cap = (int64_t)PLAN(f, AST_MOE_PLAN_CAPACITY), kept = 0;
    for (int e = 0; e < E; e++) {
        int64_t at = (int64_t)PLAN(f, AST_MOE_PLAN_OFFSETS(P) + e), end = (int64_t)PLAN(f, AST_MOE_PLAN_OFFSETS(P) + e + 1);
        int64_t load = 0;
        for (int64_t i = 0; i < P; i++) { /* candidates in slot-major order */
            int t = (int)(i % T), w = t * K + (int)(i / T);
            if (!valid_of(t) || (int)PLAN(f, AST_MOE_PLAN_EXPERT(P) + w) != e) continue;
            int is_kept = load++ < cap;
            cr_assert_eq(PLAN(f, AST_MOE_PLAN_POS(P) + w) >= 0.0f, is_kept, "expert %d candidate %lld", e, (long long)i);
            if (!is_kept) continue;
            cr_assert_eq(PLAN(f, AST_MOE_PLAN_POS(P) + w), (float)at, "expert %d candidate %lld", e, (long long)i);
            cr_assert_eq(PLAN(f, AST_MOE_PLAN_TOKEN(P) + at), (float)t);
            cr_assert_eq(PLAN(f, AST_MOE_PLAN_WEIGHT(P) + at), (float)w);
            at++;
        }
        cr_assert_eq(at, end, "expert %d: block ends at %lld, offsets say %lld", e, (long long)at, (long long)end);
        cr_assert_eq(PLAN(f, AST_MOE_PLAN_LOAD(P, E) + e), (float)load);
        kept += end - (int64_t)PLAN(f, AST_MOE_PLAN_OFFSETS(P) + e);
    }
    cr_assert_eq(PLAN(f, AST_MOE_PLAN_KEPT_PAIRS), (float)kept);
    cr_assert_eq(PLAN(f, AST_MOE_PLAN_VALID), (float)(T - 3));
    cr_assert_eq(PLAN(f, AST_MOE_PLAN_DROPPED), (float)((T - 3) * K - kept));
}

/* The per-set counts add up the kept pairs; the argmax counts the valid tokens. */
static void check_counts(const fixture *f)
{
    float sets[2 * E] = {0}, argmax = 0.0f;
    for (int w = 0; w < P; w++)
        if (PLAN(f, AST_MOE_PLAN_POS(P) + w) >= 0.0f)
            sets[(w / K) / PER_SET * E + (int)PLAN(f, AST_MOE_PLAN_EXPERT(P) + w)] += 1.0f;
    for (int i = 0; i < 2 * E; i++) cr_assert_eq(PLAN(f, AST_MOE_PLAN_SETS(P, E) + i), sets[i], "set count %d", i);
    for (int e = 0; e < E; e++) argmax += PLAN(f, AST_MOE_PLAN_ARGMAX(P, E) + e);
    cr_assert_eq(argmax, (float)(T - 3));
}

Test(ops_moe, route_keeps_the_top_k_up_to_capacity_sorted_by_expert)
{
    float factors[] = {0.0f, 0.7f, 1.5f};
    for (int i = 0; i < 3; i++) {
        fixture f = make_plan(factors[i]);
        double want = factors[i] > 0 ? ceil((T - 3) * K * (double)factors[i] / E) : (T - 3) * K;
        cr_assert_eq(PLAN(&f, AST_MOE_PLAN_CAPACITY), (float)want, "capacity factor %g", (double)factors[i]);
        check_choices(&f);
        check_sort(&f);
        check_counts(&f);
        free_fixture(&f);
    }
}

/* A valid row draws what it would as a row of the compacted tensor: both
 * routings (all rows, compacted rows) see the same noise. */
Test(ops_moe, noise_of_valid_rows_is_the_compacted_rows_noise)
{
    float v[T];
    for (int t = 0; t < T; t++) v[t] = (t % 4 == 1) ? 0.0f : 1.0f;
    int tv = 0;
    for (int t = 0; t < T; t++) tv += v[t] != 0.0f;
    ast_ctx *a = ast_ctx_new(9), *b = ast_ctx_new(9);
    ast_tensor *rows = ast_tensor_from(a, 1, (int64_t[]){T}, v);
    ast_tensor *all = ast_noise_normal(a, 2, (int64_t[]){T, E}, rows, 0.5f);
    ast_tensor *compact = ast_noise_normal(b, 2, (int64_t[]){tv, E}, NULL, 0.5f);
    double sq = 0.0;
    for (int t = 0, r = 0; t < T; t++) {
        for (int e = 0; e < E; e++) {
            float want = v[t] != 0.0f ? compact->data[r * E + e] : 0.0f;
            cr_assert_eq(all->data[t * E + e], want, "row %d col %d", t, e);
            sq += (double)want * want;
        }
        r += v[t] != 0.0f;
    }
    /* the draws are N(0, 0.25): 45 of them have a mean square within a factor 3 */
    cr_assert(sq / (tv * E) > 0.25 / 3 && sq / (tv * E) < 0.25 * 3, "mean square %g", sq / (tv * E));
    ast_ctx_free(a);
    ast_ctx_free(b);
}

/* The consumers' forwards, against loops over the plan. */
Test(ops_moe, gather_grouped_combine_follow_the_plan)
{
    fixture f = make_plan(0.7f);
    ast_tensor *x = gc_input(f.p, "x", 2, (int64_t[]){T, D}, 1.0f), *w[E], *bias[E];
    for (int e = 0; e < E; e++) {
        w[e] = named_input(f.p, "w", e, 2, (int64_t[]){H, D});
        bias[e] = named_input(f.p, "b", e, 1, (int64_t[]){H});
    }
    ast_tensor *weights = gc_input(f.p, "weights", 2, (int64_t[]){T, K}, 1.0f);
    ast_tensor *g = ast_moe_gather(f.c, x, f.plan, K);
    ast_tensor *y = ast_moe_grouped_linear(f.c, g, f.plan, K, E, w, bias);
    ast_tensor *out = ast_moe_combine(f.c, y, weights, f.plan);
    int64_t kept = (int64_t)PLAN(&f, AST_MOE_PLAN_KEPT_PAIRS);
    float want[T * H] = {0};
    for (int64_t p = 0; p < P; p++) {
        int t = p < kept ? (int)PLAN(&f, AST_MOE_PLAN_TOKEN(P) + p) : -1;
        int slot = p < kept ? (int)PLAN(&f, AST_MOE_PLAN_WEIGHT(P) + p) : -1;
        int e = 0;
        while (p < kept && PLAN(&f, AST_MOE_PLAN_OFFSETS(P) + e + 1) <= (float)p) e++;
        for (int j = 0; j < D; j++) cr_assert_eq(g->data[p * D + j], t >= 0 ? x->data[t * D + j] : 0.0f);
        for (int o = 0; o < H; o++) {
            float v = 0.0f;
            if (t >= 0) {
                v = bias[e]->data[o];
                for (int j = 0; j < D; j++) v += x->data[t * D + j] * w[e]->data[o * D + j];
                want[t * H + o] += weights->data[slot] * v;
            }
            cr_assert_float_eq(y->data[p * H + o], v, 1e-5, "pair %lld output %d", (long long)p, o);
        }
    }
    for (int i = 0; i < T * H; i++) cr_assert_float_eq(out->data[i], want[i], 1e-5, "output %d", i);
    free_fixture(&f);
}

/* ---- gradients, the plan fixed ---------------------------------------------------- */

typedef struct grad_ud {
    ast_tensor *plan;
    ast_tensor **w, **b;
} grad_ud;

static ast_tensor *fwd_pick(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_moe_pick(c, in[0], ((grad_ud *)ud)->plan, K);
}

static ast_tensor *fwd_gather(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_moe_gather(c, in[0], ((grad_ud *)ud)->plan, K);
}

/* in: x [P, D], then E weights and E biases. */
static ast_tensor *fwd_grouped(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_moe_grouped_linear(c, in[0], ((grad_ud *)ud)->plan, K, E, in + 1, in + 1 + E);
}

static ast_tensor *fwd_combine(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_moe_combine(c, in[0], in[1], ((grad_ud *)ud)->plan);
}

Test(ops_moe, gradients_through_the_plan)
{
    fixture f = make_plan(0.7f);
    grad_ud ud = {.plan = f.plan};
    gc_result r = gc_check(fwd_pick, &f.logits, 1, &ud, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "moe_pick");
    ast_tensor *x = gc_input(f.p, "x", 2, (int64_t[]){T, D}, 1.0f);
    r = gc_check(fwd_gather, &x, 1, &ud, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "moe_gather");
    ast_tensor *in[1 + 2 * E];
    in[0] = gc_input(f.p, "rows", 2, (int64_t[]){P, D}, 1.0f);
    for (int e = 0; e < E; e++) {
        in[1 + e] = named_input(f.p, "w", e, 2, (int64_t[]){H, D});
        in[1 + E + e] = named_input(f.p, "b", e, 1, (int64_t[]){H});
    }
    r = gc_check(fwd_grouped, in, 1 + 2 * E, &ud, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "moe_grouped_linear");
    ast_tensor *yw[2] = {gc_input(f.p, "y", 2, (int64_t[]){P, D}, 1.0f), gc_input(f.p, "weights", 2, (int64_t[]){T, K}, 1.0f)};
    r = gc_check(fwd_combine, yw, 2, &ud, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "moe_combine");
    free_fixture(&f);
}
