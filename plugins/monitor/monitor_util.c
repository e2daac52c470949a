#include <stdlib.h>
#include <string.h>

#include "monitor_util.h"

int mon_due(const ast_observation *o, int64_t every)
{
    return o->phase == AST_PHASE_TRAIN_STEP && o->step % every == 0;
}

const ast_stat *mon_find(const ast_observation *o, const char *name, int layer)
{
    for (int i = 0; i < o->n_stats; i++)
        if (o->stats[i].layer == layer && !strcmp(o->stats[i].name, name)) return &o->stats[i];
    return NULL;
}

double mon_mean(const ast_stat *s)
{
    if (s->n < 1) return 0.0;
    double sum = 0.0;
    for (int i = 0; i < s->n; i++) sum += s->values[i];
    return sum / s->n;
}

int mon_grow(void **arr, int *n, int want, size_t size)
{
    if (want <= *n) return 1;
    char *p = realloc(*arr, (size_t)want * size);
    if (!p) return 0;
    memset(p + (size_t)*n * size, 0, (size_t)(want - *n) * size);
    *arr = p;
    *n = want;
    return 1;
}
