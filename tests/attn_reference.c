#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn_reference.h"

const float *ref_param(const ast_params *p, const char *prefix, const char *name)
{
    char full[256];
    snprintf(full, sizeof full, "%s.%s", prefix, name);
    ast_tensor *t = ast_params_find(p, full);
    if (!t) {
        fprintf(stderr, "reference: no parameter %s\n", full);
        abort();
    }
    return t->data;
}

/* y[r, o] = sum_i x[r, i] w[o, i] + b[o] for r < rows; b may be NULL. */
void ref_dense(const double *x, int rows, int in, const float *w, const float *b, int out, double *y)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++) s += x[r * in + i] * w[o * in + i];
            y[r * out + o] = s;
        }
}

static void layernorm(const double *x, int rows, int E, const float *w, const float *b, double eps, double *y)
{
    for (int r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int e = 0; e < E; e++) mean += x[r * E + e] / E;
        for (int e = 0; e < E; e++) var += (x[r * E + e] - mean) * (x[r * E + e] - mean) / E;
        for (int e = 0; e < E; e++) y[r * E + e] = (x[r * E + e] - mean) / sqrt(var + eps) * w[e] + b[e];
    }
}

/* Softmax of n values v[0], v[stride], ... over the entries with keep != 0. */
static void softmax_strided(double *v, int n, int stride, const int *keep)
{
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        if (!keep || keep[i]) mx = fmax(mx, v[i * stride]);
    for (int i = 0; i < n; i++) {
        v[i * stride] = (!keep || keep[i]) ? exp(v[i * stride] - mx) : 0.0;
        sum += v[i * stride];
    }
    for (int i = 0; i < n; i++) v[i * stride] /= sum;
}

/* keep[j] for the N cells of set b, with the "no valid cell keeps all" rule. */
static void valid_keys(const float *mask, int b, int N, int *keep)
{
    int any = 0;
    for (int j = 0; j < N; j++) any |= keep[j] = !mask || mask[b * N + j] > 0.5f;
    if (!any)
        for (int j = 0; j < N; j++) keep[j] = 1;
}

static double *to_double(const float *x, int n)
{
    double *y = malloc((size_t)n * sizeof *y);
    for (int i = 0; i < n; i++) y[i] = x[i];
    return y;
}

/* The linear-attention half of docs/model.md §2.5 on one set: h = x + to_out(o). */
static void linear_attention_set(const ast_params *p, const char *pre, ref_dims d, const double *x,
                                 const int *keep, double *h)
{
    int N = d.N, E = d.E, dh = E / d.H;
    double *a = malloc(sizeof(double) * (size_t)(N * E * 5)), *q = a + N * E, *k = q + N * E, *v = k + N * E,
           *o = v + N * E;
    layernorm(x, N, E, ref_param(p, pre, "layers.layers.0.0.norm.weight"),
              ref_param(p, pre, "layers.layers.0.0.norm.bias"), 1e-5, a);
    ref_dense(a, N, E, ref_param(p, pre, "layers.layers.0.0.fn.to_q.weight"), NULL, E, q);
    ref_dense(a, N, E, ref_param(p, pre, "layers.layers.0.0.fn.to_k.weight"), NULL, E, k);
    ref_dense(a, N, E, ref_param(p, pre, "layers.layers.0.0.fn.to_v.weight"), NULL, E, v);
    for (int hd = 0; hd < d.H; hd++) {
        for (int n = 0; n < N; n++) softmax_strided(q + n * E + hd * dh, dh, 1, NULL);
        for (int j = 0; j < dh; j++) softmax_strided(k + hd * dh + j, N, E, keep);
        for (int n = 0; n < N; n++)
            for (int e = 0; e < dh; e++) {
                double s = 0;
                for (int j = 0; j < dh; j++) {
                    double ctx = 0; /* (k^T v)[j, e] */
                    for (int m = 0; m < N; m++) ctx += k[m * E + hd * dh + j] * v[m * E + hd * dh + e];
                    s += q[n * E + hd * dh + j] / sqrt(dh) * ctx;
                }
                o[n * E + hd * dh + e] = s;
            }
    }
    ref_dense(o, N, E, ref_param(p, pre, "layers.layers.0.0.fn.to_out.weight"),
          ref_param(p, pre, "layers.layers.0.0.fn.to_out.bias"), E, h);
    for (int i = 0; i < N * E; i++) h[i] += x[i];
    free(a);
}

void ref_linear_block(const ast_params *p, const char *pre, ref_dims d, const float *x, const float *mask,
                      double *out)
{
    int N = d.N, E = d.E, F = 4 * E;
    double *xs = to_double(x, d.B * N * E), *a = malloc(sizeof(double) * (size_t)(N * E + N * F)), *f = a + N * E;
    int *keep = malloc(sizeof(int) * (size_t)N);
    for (int b = 0; b < d.B; b++) {
        double *h = out + b * N * E;
        valid_keys(mask, b, N, keep);
        linear_attention_set(p, pre, d, xs + b * N * E, keep, h);
        layernorm(h, N, E, ref_param(p, pre, "layers.layers.0.1.norm.weight"),
                  ref_param(p, pre, "layers.layers.0.1.norm.bias"), 1e-5, a);
        ref_dense(a, N, E, ref_param(p, pre, "layers.layers.0.1.fn.fn.w1.weight"),
                  ref_param(p, pre, "layers.layers.0.1.fn.fn.w1.bias"), F, f);
        for (int i = 0; i < N * F; i++) f[i] = 0.5 * f[i] * (1.0 + erf(f[i] / sqrt(2.0)));
        ref_dense(f, N, F, ref_param(p, pre, "layers.layers.0.1.fn.fn.w2.weight"),
                  ref_param(p, pre, "layers.layers.0.1.fn.fn.w2.bias"), E, a);
        for (int i = 0; i < N * E; i++) h[i] += a[i];
    }
    free(xs);
    free(a);
    free(keep);
}

/* RMSNorm over each head's dh features, weight shared by the heads. */
static void rmsnorm_heads(double *x, int N, int E, int dh, const float *w)
{
    for (int r = 0; r < N * E / dh; r++) {
        double *v = x + r * dh, ms = 0;
        for (int j = 0; j < dh; j++) ms += v[j] * v[j] / dh;
        for (int j = 0; j < dh; j++) v[j] = v[j] / sqrt(ms + 1e-6) * w[j];
    }
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

void ref_gated_block(const ast_params *p, const char *pre, ref_dims d, int gate_type, int qk_norm, const float *x,
                     const float *mask, double *out)
{
    int N = d.N, E = d.E, dh = E / d.H, QW = E + (gate_type == 0 ? d.H : gate_type == 1 ? E : 0);
    double *xs = to_double(x, d.B * N * E), *qg = malloc(sizeof(double) * (size_t)(N * (QW + 3 * E + N)));
    double *q = malloc(sizeof(double) * (size_t)(N * E)), *k = qg + N * QW, *v = k + N * E, *o = v + N * E,
           *s = o + N * E;
    int *keep = malloc(sizeof(int) * (size_t)N);
    for (int b = 0; b < d.B; b++) {
        valid_keys(mask, b, N, keep);
        ref_dense(xs + b * N * E, N, E, ref_param(p, pre, "q_proj.weight"), ref_param(p, pre, "q_proj.bias"), QW, qg);
        ref_dense(xs + b * N * E, N, E, ref_param(p, pre, "k_proj.weight"), ref_param(p, pre, "k_proj.bias"), E, k);
        ref_dense(xs + b * N * E, N, E, ref_param(p, pre, "v_proj.weight"), ref_param(p, pre, "v_proj.bias"), E, v);
        for (int n = 0; n < N; n++)
            for (int e = 0; e < E; e++) q[n * E + e] = qg[n * QW + e];
        if (qk_norm) {
            rmsnorm_heads(q, N, E, dh, ref_param(p, pre, "q_norm.weight"));
            rmsnorm_heads(k, N, E, dh, ref_param(p, pre, "k_norm.weight"));
        }
        for (int hd = 0; hd < d.H; hd++)
            for (int i = 0; i < N; i++) {
                for (int j = 0; j < N; j++) {
                    double dot = 0;
                    for (int e = 0; e < dh; e++) dot += q[i * E + hd * dh + e] * k[j * E + hd * dh + e];
                    s[j] = dot / sqrt(dh);
                }
                softmax_strided(s, N, 1, keep);
                for (int e = 0; e < dh; e++) {
                    double acc = 0, gate = 1;
                    for (int j = 0; j < N; j++) acc += s[j] * v[j * E + hd * dh + e];
                    if (gate_type == 0) gate = sigmoid(qg[i * QW + E + hd]);
                    if (gate_type == 1) gate = sigmoid(qg[i * QW + E + hd * dh + e]);
                    o[i * E + hd * dh + e] = acc * gate;
                }
            }
        ref_dense(o, N, E, ref_param(p, pre, "o_proj.weight"), ref_param(p, pre, "o_proj.bias"), E, out + b * N * E);
    }
    free(xs);
    free(qg);
    free(q);
    free(keep);
}
