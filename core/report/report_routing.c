/* Routing by diffusion time: time_conditioning logs at each epoch's end,
 * per layer, bucket q of diffusion time and expert e, the expert's share
 * of the bucket's tokens as t<q>.expert<e>.share (docs/monitors.md). A run
 * keeps its last epoch's values; a config's grid holds them per seed.
 * Experts are not matched across seeds or layers: each learns its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

/* "t<q>.expert<e>.<what>", exactly; *share: what is "share". */
static int parse(const char *metric, int *bucket, int *expert, int *share)
{
    char what[8];
    int end = 0;
    if (sscanf(metric, "t%d.expert%d.%7[a-z]%n", bucket, expert, what, &end) != 3 || metric[end]) return 0;
    if (*bucket < 0 || *expert < 0 || (strcmp(what, "share") && strcmp(what, "tokens"))) return 0;
    *share = !strcmp(what, "share");
    return 1;
}

int rp_routing_line(rp_routes *r, const char *metric, int layer, double step, double value)
{
    int bucket, expert, share;
    if (!parse(metric, &bucket, &expert, &share)) return 0;
    if (!share || layer < 0 || !isfinite(value) || step < r->step) return 1;
    if (step > r->step) r->n = 0, r->step = step; /* a later epoch replaces the earlier */
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 32;
        r->v = ast_xrealloc(r->v, (size_t)r->cap * sizeof *r->v);
    }
    r->v[r->n++] = (rp_route){layer, bucket, expert, value};
    return 1;
}

/* The sizes of config c's grid: the largest layer, bucket and expert any run logged, plus one. */
static void grid_size(const rp_sweep *s, int c, rp_routing_grid *g)
{
    for (int i = 0; i < s->configs[c].n_runs; i++) {
        const rp_routes *r = &s->runs[s->configs[c].runs[i]].routes;
        for (int k = 0; k < r->n; k++) {
            g->layers = r->v[k].layer >= g->layers ? r->v[k].layer + 1 : g->layers;
            g->buckets = r->v[k].bucket >= g->buckets ? r->v[k].bucket + 1 : g->buckets;
            g->experts = r->v[k].expert >= g->experts ? r->v[k].expert + 1 : g->experts;
        }
    }
}

static size_t cell(const rp_routing_grid *g, int run, int layer, int expert, int bucket)
{
    return (((size_t)run * g->layers + layer) * g->experts + expert) * g->buckets + bucket;
}

double rp_routing_share(const rp_routing_grid *g, int run, int layer, int expert, int bucket)
{
    return g->share[cell(g, run, layer, expert, bucket)];
}

static void fill(const rp_sweep *s, int c, rp_routing_grid *g)
{
    size_t n = cell(g, g->runs, 0, 0, 0);
    g->share = ast_xmalloc((n + 1) * sizeof *g->share);
    g->seed = ast_xmalloc((size_t)(g->runs + 1) * sizeof *g->seed);
    for (size_t i = 0; i < n; i++) g->share[i] = NAN;
    for (int i = 0; i < g->runs; i++) {
        const rp_run *run = &s->runs[s->configs[c].runs[i]];
        g->seed[i] = run->seed;
        for (int k = 0; k < run->routes.n; k++) {
            const rp_route *v = &run->routes.v[k];
            g->share[cell(g, i, v->layer, v->expert, v->bucket)] = v->share;
        }
    }
}

int rp_routing_grids(const rp_sweep *s, rp_routing_grid **out)
{
    int n = 0;
    *out = ast_xcalloc((size_t)s->n_configs + 1, sizeof **out);
    for (int c = 0; c < s->n_configs; c++) {
        rp_routing_grid *g = &(*out)[n];
        *g = (rp_routing_grid){.config = s->configs[c].name, .color = c, .runs = s->configs[c].n_runs};
        grid_size(s, c, g);
        if (!g->layers) continue;
        fill(s, c, g);
        n++;
    }
    return n;
}

void rp_routing_grids_free(rp_routing_grid *g, int n)
{
    for (int i = 0; i < n; i++) free(g[i].seed), free(g[i].share);
    free(g);
}
