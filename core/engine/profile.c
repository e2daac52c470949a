/* ALPHAST_PROFILE=1: where a step's time goes, per op. Forward time is the
 * wall time from the previous op's record to this one (so it includes the
 * plugin code between ops); backward time is each node's backward call.
 * The table goes to stderr when the context is freed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile.h"

#define MAX_OPS 96

typedef struct op_time {
    const char *op;
    double forward, backward;
    long calls;
} op_time;

struct ast_profile {
    op_time ops[MAX_OPS];
    int n_ops;
    long steps;
    double mark;
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

void ast_profile_step(ast_profile *p)
{
    p->steps++;
    p->mark = now();
}

void ast_profile_mark(ast_profile *p) { p->mark = now(); }

void ast_profile_forward(ast_profile *p, const char *op)
{
    double t = now();
    op_time *e = entry(p, op);
    e->forward += t - p->mark;
    e->calls++;
    p->mark = t;
}

double ast_profile_now(void) { return now(); }

void ast_profile_backward(ast_profile *p, const char *op, double seconds) { entry(p, op)->backward += seconds; }

static int by_total(const void *a, const void *b)
{
    const op_time *x = a, *y = b;
    double tx = x->forward + x->backward, ty = y->forward + y->backward;
    return (tx < ty) - (tx > ty);
}

void ast_profile_print(ast_profile *p, FILE *out)
{
    long steps = p->steps ? p->steps : 1;
    double total = 0.0;
    for (int i = 0; i < p->n_ops; i++) total += p->ops[i].forward + p->ops[i].backward;
    qsort(p->ops, (size_t)p->n_ops, sizeof *p->ops, by_total);
    fprintf(out, "alphast profile: %ld steps, ms per step (forward = since the previous op's record)\n", p->steps);
    fprintf(out, "%-22s %8s %10s %10s %7s\n", "op", "calls", "forward", "backward", "share");
    for (int i = 0; i < p->n_ops; i++) {
        const op_time *e = &p->ops[i];
        fprintf(out, "%-22s %8.1f %10.2f %10.2f %6.1f%%\n", e->op, (double)e->calls / (double)steps,
                1e3 * e->forward / (double)steps, 1e3 * e->backward / (double)steps,
                total > 0 ? 100.0 * (e->forward + e->backward) / total : 0.0);
    }
    fprintf(out, "%-22s %8s %21.2f\n", "total on the tape", "", 1e3 * total / (double)steps);
}
