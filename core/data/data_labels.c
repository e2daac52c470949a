/* Labels from strings (a hash table, so that 100k distinct cell ids cost
 * linear time) and from obs columns. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "data/data_labels.h"

char *ast_number_label(double v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", v);
    return ast_xstrdup(buf);
}

/* Open addressing: slot holds a name index + 1, 0 = empty. */
typedef struct table {
    int *slot;
    uint64_t mask;
} table;

static uint64_t hash(const char *s) { return ast_fnv1a(AST_FNV_OFFSET, s, strlen(s)); }

static void table_grow(table *t, char **names, int n)
{
    uint64_t size = (t->mask + 1) * 2;
    free(t->slot);
    t->slot = ast_xcalloc(size, sizeof *t->slot);
    t->mask = size - 1;
    for (int j = 0; j < n; j++) {
        uint64_t i = hash(names[j]) & t->mask;
        while (t->slot[i]) i = (i + 1) & t->mask;
        t->slot[i] = j + 1;
    }
}

/* The code of s, adding it to names when new. */
static int code_of(table *t, const char *s, char ***names, int *n)
{
    uint64_t i = hash(s) & t->mask;
    for (; t->slot[i]; i = (i + 1) & t->mask)
        if (!strcmp((*names)[t->slot[i] - 1], s)) return t->slot[i] - 1;
    if ((*n & (*n - 1)) == 0) *names = ast_xrealloc(*names, (size_t)(*n ? 2 * *n : 1) * sizeof **names);
    (*names)[*n] = ast_xstrdup(s);
    t->slot[i] = ++*n;
    if ((uint64_t)*n * 2 > t->mask) table_grow(t, *names, *n);
    return *n - 1;
}

int *ast_labels_of_strings(char *const *s, int64_t n, char ***names, int *n_names)
{
    table t = {ast_xcalloc(16, sizeof(int)), 15};
    int *codes = ast_xmalloc((size_t)(n ? n : 1) * sizeof *codes);
    *names = NULL, *n_names = 0;
    for (int64_t i = 0; i < n; i++) codes[i] = s[i] ? code_of(&t, s[i], names, n_names) : -1;
    free(t.slot);
    return codes;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The distinct non-NaN values of v, increasing; their count in *m. */
static double *distinct(const double *v, int64_t n, int *m)
{
    double *u = ast_xmalloc((size_t)(n ? n : 1) * sizeof *u);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(v[i])) u[k++] = v[i];
    qsort(u, (size_t)k, sizeof *u, cmp_double);
    int w = 0;
    for (int64_t i = 0; i < k; i++)
        if (!w || u[i] != u[w - 1]) u[w++] = u[i];
    *m = w;
    return u;
}

static int *labels_of_numbers(const double *v, int64_t n, char ***names, int *n_names)
{
    double *u = distinct(v, n, n_names);
    int *codes = ast_xmalloc((size_t)(n ? n : 1) * sizeof *codes);
    for (int64_t i = 0; i < n; i++) {
        const double *hit = isnan(v[i]) ? NULL : bsearch(&v[i], u, (size_t)*n_names, sizeof *u, cmp_double);
        codes[i] = hit ? (int)(hit - u) : -1;
    }
    *names = ast_xcalloc((size_t)*n_names + 1, sizeof **names);
    for (int j = 0; j < *n_names; j++) (*names)[j] = ast_number_label(u[j]);
    free(u);
    return codes;
}

int *ast_labels_of_column(const ast_obs_column *c, int64_t n, char ***names, int *n_names)
{
    if (c->kind == AST_OBS_NUMBER) return labels_of_numbers(c->numbers, n, names, n_names);
    int *codes = ast_xmalloc((size_t)(n ? n : 1) * sizeof *codes);
    memcpy(codes, c->codes, (size_t)n * sizeof *codes);
    *names = ast_xcalloc((size_t)c->n_categories + 1, sizeof **names);
    for (int j = 0; j < c->n_categories; j++) (*names)[j] = ast_xstrdup(c->categories[j]);
    *n_names = c->n_categories;
    return codes;
}
