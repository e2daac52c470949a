/* Training-free embeddings of expression (see model/expr_embed.h):
 * classical MDS (model/top_eigen.h), Isomap on top of it, and the
 * distance building blocks the baselines share. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "model/expr_embed.h"
#include "model/top_eigen.h"

static double *to_double(const float *x, size_t len)
{
    double *out = ast_xmalloc(len * sizeof *out);
    for (size_t i = 0; i < len; i++) out[i] = x[i];
    return out;
}

static void row_sq_norms(const double *x, int n, int D, double *out)
{
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int d = 0; d < D; d++) s += x[(size_t)i * D + d] * x[(size_t)i * D + d];
        out[i] = s;
    }
}

/* A set against itself goes through dsyrk and is mirrored, so that the
 * matrix is exactly symmetric with a zero diagonal, as a distance must be. */
static void self_sq_distances(const double *a, int n, int D, const double *na, double *d2)
{
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, n, D, -2.0, a, D, 0.0, d2, n);
    for (int i = 0; i < n; i++) {
        d2[(size_t)i * n + i] = 0.0;
        for (int j = i + 1; j < n; j++) {
            double v = fmax(d2[(size_t)i * n + j] + na[i] + na[j], 0.0);
            d2[(size_t)i * n + j] = d2[(size_t)j * n + i] = v;
        }
    }
}

void ast_sq_distances(const float *a, int n, const float *b, int m, int D, double *d2)
{
    if (n == 0 || m == 0) return; /* BLAS rejects a leading dimension of 0 */
    int self = b == a && m == n;
    double *ad = to_double(a, (size_t)n * D), *bd = self ? ad : to_double(b, (size_t)m * D);
    double *na = ast_xmalloc((size_t)(n + m) * sizeof *na), *nb = na + n;
    row_sq_norms(ad, n, D, na);
    if (self) {
        self_sq_distances(ad, n, D, na, d2);
    } else {
        row_sq_norms(bd, m, D, nb);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, D, -2.0, ad, D, bd, D, 0.0, d2, m);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < m; j++) d2[(size_t)i * m + j] = fmax(d2[(size_t)i * m + j] + na[i] + nb[j], 0.0);
        free(bd);
    }
    free(ad), free(na);
}

/* Insertion into a sorted list of k: O(m k), and k is small. The strict <
 * keeps the earlier index on ties, as the scan is in index order. */
void ast_k_nearest(const double *d, int m, int k, int skip, int *out)
{
    int have = 0;
    if (k == 0) return; /* a single cell has no neighbours */
    for (int j = 0; j < m; j++) {
        if (j == skip || (have == k && !(d[j] < d[out[k - 1]]))) continue;
        int at = have < k ? have++ : k - 1;
        for (; at > 0 && d[j] < d[out[at - 1]]; at--) out[at] = out[at - 1];
        out[at] = j;
    }
    AST_ASSERT(have == k, "asked for %d nearest of %d candidates", k, have);
}

/* B = -1/2 J D2 J in place, J the centring matrix: d2_ij minus its row and
 * column means plus the grand mean (D2 is symmetric). */
static void double_centre(double *d2, int n)
{
    double *mean = ast_xcalloc((size_t)n, sizeof *mean), grand = 0.0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) mean[i] += d2[(size_t)i * n + j];
        mean[i] /= n;
        grand += mean[i] / n;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) d2[(size_t)i * n + j] = -0.5 * (d2[(size_t)i * n + j] - mean[i] - mean[j] + grand);
    free(mean);
}

/* +1 or -1: the sign that makes v's largest-magnitude entry positive. */
static double orientation(const double *v, int n)
{
    int at = 0;
    for (int i = 1; i < n; i++)
        if (fabs(v[i]) > fabs(v[at])) at = i;
    return v[at] < 0.0 ? -1.0 : 1.0;
}

/* Classical MDS of the squared distances d2 [n, n] (destroyed). */
static void mds_from_sq(double *d2, int n, int dims, float *pos)
{
    AST_ASSERT(dims >= 1 && dims <= 3, "MDS into %d dimensions (1 to 3)", dims);
    memset(pos, 0, (size_t)3 * n * sizeof *pos);
    int m = dims < n ? dims : n;
    if (m < 1) return;
    double_centre(d2, n);
    double *w = ast_xmalloc((size_t)n * (1 + m) * sizeof *w), *z = w + n;
    ast_top_eigenpairs(d2, n, m, w, z, 0);
    for (int c = 0; c < m; c++) {
        const double *v = z + (size_t)(m - 1 - c) * n; /* largest eigenvalue first */
        double scale = orientation(v, n) * sqrt(fmax(w[m - 1 - c], 0.0));
        for (int i = 0; i < n; i++) pos[i * 3 + c] = (float)(scale * v[i]);
    }
    free(w);
}

void ast_baseline_mds(const float *x, int n, int G, int dims, float *pos)
{
    double *d2 = ast_xmalloc((size_t)n * n * sizeof *d2);
    ast_sq_distances(x, n, x, n, G, d2);
    mds_from_sq(d2, n, dims, pos);
    free(d2);
}

double ast_mean_nn_distance(const float *pos, int n)
{
    if (n < 2) return 0.0;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        double best = INFINITY;
        for (int j = 0; j < n; j++) {
            double dx = (double)pos[i * 3] - pos[j * 3], dy = (double)pos[i * 3 + 1] - pos[j * 3 + 1];
            double dz = (double)pos[i * 3 + 2] - pos[j * 3 + 2], d = dx * dx + dy * dy + dz * dz;
            if (j != i && d < best) best = d;
        }
        sum += sqrt(best);
    }
    return sum / n;
}

void ast_rescale_to_spacing(float *pos, int n, double spacing)
{
    double now = ast_mean_nn_distance(pos, n);
    if (spacing == 0.0 || !(now > 0.0)) return;
    for (int i = 0; i < 3 * n; i++) pos[i] = (float)(pos[i] * (spacing / now));
}

/* ---- Isomap ---------------------------------------------------------------- */

/* The undirected graph as directed edges (each edge both ways), then in
 * compressed rows: the edges out of u are adj[start[u] .. start[u + 1]). */
typedef struct graph {
    int n, edges, cap;
    int *from, *to, *start, *adj;
    double *len, *adj_len;
} graph;

static void graph_add(graph *g, int a, int b, double len)
{
    if (g->edges + 2 > g->cap) {
        g->cap = 2 * g->cap + 16;
        g->from = ast_xrealloc(g->from, (size_t)g->cap * sizeof *g->from);
        g->to = ast_xrealloc(g->to, (size_t)g->cap * sizeof *g->to);
        g->len = ast_xrealloc(g->len, (size_t)g->cap * sizeof *g->len);
    }
    g->from[g->edges] = a, g->to[g->edges] = b, g->len[g->edges++] = len;
    g->from[g->edges] = b, g->to[g->edges] = a, g->len[g->edges++] = len;
}

static void graph_compress(graph *g)
{
    g->start = ast_xcalloc((size_t)g->n + 1, sizeof *g->start);
    g->adj = ast_xmalloc((size_t)g->edges * sizeof *g->adj);
    g->adj_len = ast_xmalloc((size_t)g->edges * sizeof *g->adj_len);
    for (int e = 0; e < g->edges; e++) g->start[g->from[e] + 1]++;
    for (int u = 0; u < g->n; u++) g->start[u + 1] += g->start[u];
    int *fill = ast_xmalloc((size_t)g->n * sizeof *fill);
    memcpy(fill, g->start, (size_t)g->n * sizeof *fill);
    for (int e = 0; e < g->edges; e++) {
        int at = fill[g->from[e]]++;
        g->adj[at] = g->to[e], g->adj_len[at] = g->len[e];
    }
    free(fill);
}

static void graph_free(graph *g)
{
    free(g->from), free(g->to), free(g->len), free(g->start), free(g->adj), free(g->adj_len);
}

static int find_root(int *parent, int i)
{
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

/* Component labels 0 .. count-1 in order of each component's first cell. */
static int label_components(const graph *g, int *label)
{
    int n = g->n, count = 0, *parent = ast_xmalloc((size_t)n * sizeof *parent);
    for (int i = 0; i < n; i++) parent[i] = i, label[i] = -1;
    for (int e = 0; e < g->edges; e++) parent[find_root(parent, g->from[e])] = find_root(parent, g->to[e]);
    for (int i = 0; i < n; i++) {
        int r = find_root(parent, i);
        if (label[r] < 0) label[r] = count++;
        label[i] = label[r];
    }
    free(parent);
    return count;
}

/* scikit-learn's _fix_connected_components: each pair of components gets
 * an edge between its closest two cells (first pair in index order on
 * ties). Every pair rather than a spanning tree, so that no two components
 * are linked only through a third. */
static void join_components(graph *g, const double *d2)
{
    int n = g->n, *label = ast_xmalloc((size_t)n * sizeof *label), count = label_components(g, label);
    size_t pairs = (size_t)count * count;
    int *best = ast_xmalloc(2 * pairs * sizeof *best);
    double *best_d2 = ast_xmalloc(pairs * sizeof *best_d2);
    for (size_t p = 0; p < pairs; p++) best_d2[p] = INFINITY;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            int lo = label[i] < label[j] ? label[i] : label[j], hi = label[i] < label[j] ? label[j] : label[i];
            size_t p = (size_t)lo * count + hi;
            if (lo != hi && d2[(size_t)i * n + j] < best_d2[p])
                best_d2[p] = d2[(size_t)i * n + j], best[2 * p] = i, best[2 * p + 1] = j;
        }
    for (int a = 0; a < count; a++)
        for (int b = a + 1; b < count; b++) {
            size_t p = (size_t)a * count + b;
            graph_add(g, best[2 * p], best[2 * p + 1], sqrt(best_d2[p]));
        }
    free(label), free(best), free(best_d2);
}

/* A binary min-heap of cells keyed by their tentative distance, with each
 * cell's place in it so that a shorter path moves the cell up rather than
 * pushing a second entry: it never holds more than n cells (a heap of
 * stale entries grew to the edge count, 0.6 s of a 1,024-cell Isomap). */
typedef struct heap {
    int size, *cell, *at; /* at[c]: c's index in cell[], -1 when not in the heap */
    const double *key;
} heap;

static void heap_place(heap *h, int i, int c)
{
    h->cell[i] = c, h->at[c] = i;
}

static void heap_up(heap *h, int i)
{
    int c = h->cell[i];
    for (; i > 0 && h->key[h->cell[(i - 1) / 2]] > h->key[c]; i = (i - 1) / 2) heap_place(h, i, h->cell[(i - 1) / 2]);
    heap_place(h, i, c);
}

static int heap_pop(heap *h)
{
    int top = h->cell[0], c = h->cell[--h->size], i = 0;
    h->at[top] = -1;
    for (int l = 1; l < h->size; l = 2 * i + 1) {
        int m = l + 1 < h->size && h->key[h->cell[l + 1]] < h->key[h->cell[l]] ? l + 1 : l;
        if (!(h->key[h->cell[m]] < h->key[c])) break;
        heap_place(h, i, h->cell[m]), i = m;
    }
    if (h->size > 0) heap_place(h, i, c);
    return top;
}

/* Lower c's key to `d`, adding c if it is not in the heap. */
static void heap_lower(heap *h, double *dist, int c, double d)
{
    dist[c] = d;
    if (h->at[c] < 0) heap_place(h, h->size++, c);
    heap_up(h, h->at[c]);
}

static void dijkstra(const graph *g, int source, heap *h, double *dist)
{
    for (int i = 0; i < g->n; i++) dist[i] = INFINITY, h->at[i] = -1;
    h->key = dist, h->size = 0;
    heap_lower(h, dist, source, 0.0);
    while (h->size > 0) {
        int u = heap_pop(h);
        for (int e = g->start[u]; e < g->start[u + 1]; e++)
            if (dist[u] + g->adj_len[e] < dist[g->adj[e]]) heap_lower(h, dist, g->adj[e], dist[u] + g->adj_len[e]);
    }
}

static int listed(const int *list, int k, int j)
{
    for (int i = 0; i < k; i++)
        if (list[i] == j) return 1;
    return 0;
}

/* The k-NN graph of the cells with squared distances d2, joined. A pair
 * that are each other's neighbours is one edge, not two: the same paths,
 * a third fewer edges for Dijkstra to relax. */
static void knn_graph(const double *d2, int n, int k, graph *g)
{
    int *near = ast_xmalloc((size_t)n * k * sizeof *near + 1);
    *g = (graph){.n = n};
    for (int i = 0; i < n; i++) ast_k_nearest(d2 + (size_t)i * n, n, k, i, near + (size_t)i * k);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            int to = near[(size_t)i * k + j];
            if (to > i || !listed(near + (size_t)to * k, k, i)) graph_add(g, i, to, sqrt(d2[(size_t)i * n + to]));
        }
    free(near);
    join_components(g, d2);
    graph_compress(g);
}

/* Dijkstra from sources [lo, hi) into their rows of out, one heap per
 * range: the sources are independent, so the thread pool runs them. */
typedef struct geodesic_job {
    const graph *g;
    double *out;
} geodesic_job;

static void geodesic_rows(void *arg, int64_t lo, int64_t hi)
{
    const geodesic_job *job = arg;
    int n = job->g->n;
    heap h = {0, ast_xmalloc((size_t)2 * n * sizeof *h.cell), NULL, NULL};
    h.at = h.cell + n;
    for (int64_t i = lo; i < hi; i++) dijkstra(job->g, (int)i, &h, job->out + (size_t)i * n);
    free(h.cell);
}

/* Geodesic distances [n, n]. A path summed from either end rounds
 * differently, so the two triangles are averaged for an exactly symmetric
 * matrix. A grain of 16 sources: one Dijkstra is O(k n log n), far above
 * a thread's start-up. */
static void geodesics(const graph *g, double *out)
{
    int n = g->n;
    geodesic_job job = {g, out};
    ast_parallel_for(n, 16, geodesic_rows, &job);
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++) out[(size_t)i * n + j] = out[(size_t)j * n + i] = 0.5 * (out[(size_t)i * n + j] + out[(size_t)j * n + i]);
}

void ast_expr_geodesics(const float *x, int n, int G, int k, double *dist)
{
    AST_ASSERT(k >= 1, "Isomap needs k >= 1 neighbours (k %d)", k);
    if (k > n - 1) k = n > 1 ? n - 1 : 0;
    ast_sq_distances(x, n, x, n, G, dist);
    graph g;
    knn_graph(dist, n, k, &g);
    geodesics(&g, dist);
    graph_free(&g);
}

void ast_isomap_from_geodesics(double *dist, int n, int dims, float *pos)
{
    for (size_t i = 0; i < (size_t)n * n; i++) dist[i] *= dist[i];
    mds_from_sq(dist, n, dims, pos);
}

void ast_baseline_isomap(const float *x, int n, int G, int dims, int k, float *pos)
{
    double *d = ast_xmalloc((size_t)n * n * sizeof *d);
    ast_expr_geodesics(x, n, G, k, d);
    ast_isomap_from_geodesics(d, n, dims, pos);
    free(d);
}
