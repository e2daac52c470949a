/* What the monitor plugins share: finding the statistics a step published
 * and deciding when to report. Built into each monitor, so no plugin
 * links another. */
#ifndef ALPHAST_MONITOR_UTIL_H
#define ALPHAST_MONITOR_UTIL_H

#include "alphast/plugin.h"

/* Every monitor's first option: report every `every` training steps. */
#define MON_EVERY_OPTION(def)                                                       \
    {"every", AST_OPT_INT, def, 1, 1e9, NULL, "report every this many training steps"}

/* A training step whose number is a multiple of every. */
int mon_due(const ast_observation *o, int64_t every);

/* The statistic `name` of `layer` (-1: not per layer), or NULL. */
const ast_stat *mon_find(const ast_observation *o, const char *name, int layer);

/* Mean of a statistic's values (0 when it has none). */
double mon_mean(const ast_stat *s);

/* Grows *arr of *n elements of `size` bytes to at least `want`, zeroing
 * the new ones; 0 when out of memory. */
int mon_grow(void **arr, int *n, int want, size_t size);

#endif
