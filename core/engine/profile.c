/* ALPHAST_PROFILE=1: where a step's time and memory go, per op, in two
 * tables: the training steps' (ops on the tape) and the passes with grad
 * off (eval, sample, predict: ops outside the tape). Forward
 * time is the wall time from the previous op's record to this one (so it
 * includes the plugin code between ops), and forward bytes are the arena
 * bytes asked for in that span: the op's output and what it saves for its
 * backward. Backward time and bytes are each node's backward call's (the
 * gradients and scratch it asks for). The table goes to stderr when the
 * context is freed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile.h"

#define MAX_OPS 96

typedef struct op_time {
    const char *op;
    double forward, backward;
    double fwd_bytes, bwd_bytes;
    long calls;
    double inference, inf_bytes; /* the op outside the tape (grad off) */
    long inf_calls;
} op_time;

struct ast_profile {
    op_time ops[MAX_OPS];
    int n_ops;
    long steps, backwards;
    long inf_passes; /* steps that ran ops with grad off */
    int inf_this_step;
    double mark;
    size_t mark_bytes; /* the context's bytes asked for at the mark */
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

ast_profile *ast_profile_from_env(void)
{
    const char *v = getenv("ALPHAST_PROFILE");
    if (!v || !*v || !strcmp(v, "0")) return NULL;
    ast_profile *p = ast_xcalloc(1, sizeof *p);
    p->mark = now();
    return p;
}

static op_time *entry(ast_profile *p, const char *op)
{
    for (int i = 0; i < p->n_ops; i++)
        if (!strcmp(p->ops[i].op, op)) return &p->ops[i];
    if (p->n_ops == MAX_OPS) return &p->ops[MAX_OPS - 1]; /* lumps the rest into the last op */
    p->ops[p->n_ops].op = op;
    return &p->ops[p->n_ops++];
}

void ast_profile_step(ast_profile *p, size_t requested)
{
    p->steps++;
    p->inf_passes += p->inf_this_step;
    p->inf_this_step = 0;
    p->mark = now();
    p->mark_bytes = requested;
}

void ast_profile_mark(ast_profile *p, size_t requested)
{
    p->backwards++;
    p->mark = now();
    p->mark_bytes = requested;
}

void ast_profile_forward(ast_profile *p, const char *op, size_t requested)
{
    double t = now();
    op_time *e = entry(p, op);
    e->forward += t - p->mark;
    e->fwd_bytes += (double)(requested - p->mark_bytes);
    e->calls++;
    p->mark = t;
    p->mark_bytes = requested;
}

void ast_profile_inference(ast_profile *p, const char *op, size_t requested)
{
    double t = now();
    op_time *e = entry(p, op);
    e->inference += t - p->mark;
    e->inf_bytes += (double)(requested - p->mark_bytes);
    e->inf_calls++;
    p->inf_this_step = 1;
    p->mark = t;
    p->mark_bytes = requested;
}

double ast_profile_now(void) { return now(); }

void ast_profile_backward(ast_profile *p, const char *op, double seconds, size_t bytes)
{
    op_time *e = entry(p, op);
    e->backward += seconds;
    e->bwd_bytes += (double)bytes;
}

static int by_total(const void *a, const void *b)
{
    const op_time *x = a, *y = b;
    double tx = x->forward + x->backward, ty = y->forward + y->backward;
    return (tx < ty) - (tx > ty);
}

static int by_inference(const void *a, const void *b)
{
    const op_time *x = a, *y = b;
    return (x->inference < y->inference) - (x->inference > y->inference);
}

/* The passes with grad off (eval, sample, predict), per pass. */
static void print_inference(ast_profile *p, FILE *out)
{
    double per = (double)(p->inf_passes + p->inf_this_step), mb = 1.0 / 1048576.0, total = 0.0, bytes = 0.0;
    if (per == 0.0) return;
    for (int i = 0; i < p->n_ops; i++) total += p->ops[i].inference, bytes += p->ops[i].inf_bytes;
    qsort(p->ops, (size_t)p->n_ops, sizeof *p->ops, by_inference);
    fprintf(out, "alphast profile: %.0f passes with grad off (eval, sample, predict); per pass: calls, ms, MB asked "
                 "of the arena\n%-22s %8s %10s %7s %8s\n", per, "op", "calls", "forward", "share", "fwd MB");
    for (int i = 0; i < p->n_ops && p->ops[i].inf_calls; i++) {
        const op_time *e = &p->ops[i];
        fprintf(out, "%-22s %8.1f %10.2f %6.1f%% %8.1f\n", e->op, (double)e->inf_calls / per, 1e3 * e->inference / per,
                total > 0 ? 100.0 * e->inference / total : 0.0, e->inf_bytes * mb / per);
    }
    fprintf(out, "%-22s %8s %10.2f %7s %8.1f\n", "total, grad off", "", 1e3 * total / per, "", bytes * mb / per);
}

void ast_profile_print(ast_profile *p, FILE *out, size_t arena_peak)
{
    print_inference(p, out);
    if (!p->backwards) {
        fprintf(out, "arena peak %.1f MB\n", (double)arena_peak / 1048576.0);
        return;
    }
    /* Per training step: eval steps record nothing on the tape, so counting
     * them would dilute every figure. */
    double per = (double)p->backwards, mb = 1.0 / 1048576.0;
    double total = 0.0, fwd_mb = 0.0, bwd_mb = 0.0;
    for (int i = 0; i < p->n_ops; i++) {
        total += p->ops[i].forward + p->ops[i].backward;
        fwd_mb += p->ops[i].fwd_bytes * mb / per;
        bwd_mb += p->ops[i].bwd_bytes * mb / per;
    }
    qsort(p->ops, (size_t)p->n_ops, sizeof *p->ops, by_total);
    fprintf(out, "alphast profile: %ld steps, %ld backward passes; per backward pass: calls, ms (forward = since "
                 "the previous op's record), MB asked of the arena\n", p->steps, p->backwards);
    fprintf(out, "%-22s %8s %10s %10s %7s %8s %8s\n", "op", "calls", "forward", "backward", "share", "fwd MB",
            "bwd MB");
    for (int i = 0; i < p->n_ops; i++) {
        const op_time *e = &p->ops[i];
        fprintf(out, "%-22s %8.1f %10.2f %10.2f %6.1f%% %8.1f %8.1f\n", e->op, (double)e->calls / per,
                1e3 * e->forward / per, 1e3 * e->backward / per,
                total > 0 ? 100.0 * (e->forward + e->backward) / total : 0.0, e->fwd_bytes * mb / per,
                e->bwd_bytes * mb / per);
    }
    fprintf(out, "%-22s %8s %21.2f %8s %8.1f %8.1f\n", "total on the tape", "", 1e3 * total / per, "", fwd_mb, bwd_mb);
    fprintf(out, "arena peak %.1f MB\n", (double)arena_peak * mb);
}
