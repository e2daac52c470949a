#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn_reference.h"
#include "distbias_reference.h"

/* A Linear over every cell of every set: [B*N, in] -> [B*N, out], malloc'd. */
static double *dense(const ast_params *p, const char *prefix, const char *name, const double *x, int rows, int in,
                     int out)
{
    char w[64], b[64];
    snprintf(w, sizeof w, "%s.weight", name);
    snprintf(b, sizeof b, "%s.bias", name);
    double *y = malloc((size_t)rows * out * sizeof *y);
    ref_dense(x, rows, in, ref_param(p, prefix, w), ref_param(p, prefix, b), out, y);
    return y;
}

double ref_distance(const float *pos, int N, int b, int i, int j)
{
    double s = 0;
    for (int k = 0; k < 3; k++) {
        double diff = (double)pos[(b * N + i) * 3 + k] - pos[(b * N + j) * 3 + k];
        s += diff * diff;
    }
    return sqrt(s);
}

/* b_h(d) = sum_k w_hk exp(-(d - mu_k)^2 / (2 sigma^2)), mu_k = k sigma. */
static double bias_of(const float *w, db_dims d, int h, double dist)
{
    double sigma = d.max_distance / (d.K - 1), s = 0;
    for (int k = 0; k < d.K; k++) {
        double z = (dist - k * sigma) / sigma;
        s += w[h * d.K + k] * exp(-0.5 * z * z);
    }
    return s;
}

/* Head h's output for query i of set b into o[dh]. */
static void attend(const ast_params *p, const char *prefix, db_dims d, const double *q, const double *k,
                   const double *v, const float *pos, const float *mask, int b, int i, int h, double *o)
{
    int N = d.N, E = d.E, dh = E / d.H;
    const float *w = ref_param(p, prefix, "distance_bias.weight");
    double *s = malloc((size_t)N * sizeof *s), mx = -INFINITY, sum = 0;
    for (int j = 0; j < N; j++) {
        double dot = 0;
        for (int e = 0; e < dh; e++) dot += q[(b * N + i) * E + h * dh + e] * k[(b * N + j) * E + h * dh + e];
        s[j] = dot / sqrt(dh) + bias_of(w, d, h, ref_distance(pos, N, b, i, j));
        if (!mask || mask[b * N + j] > 0.5f) mx = fmax(mx, s[j]);
    }
    for (int j = 0; j < N; j++) sum += s[j] = (!mask || mask[b * N + j] > 0.5f) ? exp(s[j] - mx) : 0.0;
    for (int e = 0; e < dh; e++) {
        o[e] = 0;
        for (int j = 0; j < N; j++) o[e] += s[j] / sum * v[(b * N + j) * E + h * dh + e];
    }
    free(s);
}

void ref_distbias(const ast_params *p, const char *prefix, db_dims d, const float *x, const float *pos,
                  const float *mask, double *out)
{
    int rows = d.B * d.N, E = d.E, dh = E / d.H;
    double *xd = malloc((size_t)rows * E * sizeof *xd), *heads = malloc((size_t)rows * E * sizeof *heads);
    for (int i = 0; i < rows * E; i++) xd[i] = x[i];
    double *q = dense(p, prefix, "q_proj", xd, rows, E, E), *k = dense(p, prefix, "k_proj", xd, rows, E, E);
    double *v = dense(p, prefix, "v_proj", xd, rows, E, E);
    double *g = d.gate ? dense(p, prefix, "gate_proj", xd, rows, E, d.H) : NULL;
    for (int b = 0; b < d.B; b++)
        for (int i = 0; i < d.N; i++)
            for (int h = 0; h < d.H; h++) {
                double *o = heads + (b * d.N + i) * E + h * dh;
                attend(p, prefix, d, q, k, v, pos, mask, b, i, h, o);
                double gate = g ? 1.0 / (1.0 + exp(-g[(b * d.N + i) * d.H + h])) : 1.0;
                for (int e = 0; e < dh; e++) o[e] *= gate;
            }
    double *y = dense(p, prefix, "o_proj", heads, rows, E, E);
    for (int i = 0; i < rows * E; i++) out[i] = y[i];
    free(xd), free(heads), free(q), free(k), free(v), free(g), free(y);
}
