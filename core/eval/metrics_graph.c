/* Neighbourhood metrics of positions: k-NN preservation and the agreement
 * of the undirected k-NN graphs. Each layout's neighbour lists are found
 * once per set and shared by every k (a k-list is a prefix of a longer one). */
#include <stdlib.h>

#include "metrics_internal.h"

const int ast_knn_ks[AST_N_KNN_KS] = {5, 10, 20};

/* The m nearest other points of each point, ties by index: [n, m]. */
static int *neighbour_lists(const float *x, int n, int m)
{
    int *out = ast_xmalloc((size_t)n * m * sizeof *out);
    ast_indexed *o = ast_xmalloc((size_t)n * sizeof *o);
    for (int i = 0; i < n; i++) {
        int c = 0;
        for (int j = 0; j < n; j++)
            if (j != i) o[c++] = (ast_indexed){ast_dist3(x + i * 3, x + j * 3), j};
        qsort(o, (size_t)c, sizeof *o, ast_cmp_indexed);
        for (int j = 0; j < m; j++) out[i * m + j] = o[j].i;
    }
    free(o);
    return out;
}

/* k-NN preservation from lists of length m >= k. */
static double overlap(const int *nt, const int *np, int n, int m, int k)
{
    char *hit = ast_xcalloc((size_t)n, 1);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < k; j++) hit[nt[i * m + j]] = 1;
        int both = 0;
        for (int j = 0; j < k; j++) both += hit[np[i * m + j]];
        for (int j = 0; j < k; j++) hit[nt[i * m + j]] = 0;
        sum += (double)both / k;
    }
    free(hit);
    return sum / n;
}

double ast_knn_overlap(const float *truth, const float *pred, int n, int k)
{
    AST_ASSERT(n > k && k > 0, "k-NN overlap needs n > k > 0 (n %d, k %d)", n, k);
    int *nt = neighbour_lists(truth, n, k), *np = neighbour_lists(pred, n, k);
    double v = overlap(nt, np, n, k, k);
    free(nt), free(np);
    return v;
}

/* Graph scores from lists of length m >= k: bit 1 of adj[i n + j] marks
 * a true edge, bit 2 a predicted one, set symmetrically (the OR graph). */
static void graph(const int *nt, const int *np, int n, int m, int k, double out[3])
{
    unsigned char *adj = ast_xcalloc((size_t)n * n, 1);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            int a = nt[i * m + j], b = np[i * m + j];
            adj[i * n + a] |= 1, adj[a * n + i] |= 1;
            adj[i * n + b] |= 2, adj[b * n + i] |= 2;
        }
    long true_edges = 0, pred_edges = 0, both = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            true_edges += adj[i * n + j] & 1, pred_edges += adj[i * n + j] >> 1;
            both += adj[i * n + j] == 3;
        }
    free(adj);
    /* Each point has k neighbours, so both graphs have at least n k / 2 edges. */
    out[0] = (double)both / pred_edges, out[1] = (double)both / true_edges;
    out[2] = both ? 2.0 * out[0] * out[1] / (out[0] + out[1]) : 0.0;
}

void ast_knn_graph_scores(const float *truth, const float *pred, int n, int k, double *precision, double *recall,
                          double *f1)
{
    AST_ASSERT(n > k && k > 0, "the k-NN graph needs n > k > 0 (n %d, k %d)", n, k);
    int *nt = neighbour_lists(truth, n, k), *np = neighbour_lists(pred, n, k);
    double s[3];
    graph(nt, np, n, k, k, s);
    *precision = s[0], *recall = s[1], *f1 = s[2];
    free(nt), free(np);
}

void ast_neighbour_scores(const float *truth, const float *pred, int n, int k, double knn[AST_N_KNN_KS],
                          double g[3])
{
    AST_ASSERT(k > 0, "the k-NN graph needs k > 0 (k %d)", k);
    int m = k > ast_knn_ks[AST_N_KNN_KS - 1] ? k : ast_knn_ks[AST_N_KNN_KS - 1];
    if (m > n - 1) m = n - 1; /* long enough for every k used below: each is at most n - 1 */
    int *nt = neighbour_lists(truth, n, m), *np = neighbour_lists(pred, n, m);
    for (int i = 0; i < AST_N_KNN_KS; i++) knn[i] = n > ast_knn_ks[i] ? overlap(nt, np, n, m, ast_knn_ks[i]) : NAN;
    if (n > k)
        graph(nt, np, n, m, k, g);
    else
        g[0] = g[1] = g[2] = NAN;
    free(nt), free(np);
}
