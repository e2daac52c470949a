/* A run's schedule as a table: the sweep process calls the schedule's
 * functions for every optimiser step the run can take and writes the
 * values to a safetensors file, which the run's training process reads
 * (train --schedule FILE.safetensors, core/train/schedule_table.c). So a
 * sweep script is evaluated once, by the sweep, never again by its runs
 * (issue 11): what a trusted script does at top level happens once, and
 * a schedule closure that keeps state gives the same values after a
 * resume as in one go. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "io/safetensors.h"
#include "sweep_internal.h"
#include "train/schedule_table.h"

/* More steps than this would make a table of gigabytes. */
#define MAX_TABLE_STEPS 100000000LL

/* The run's optimiser steps: training.epochs x training.steps_per_epoch of
 * its resolved config. */
static int run_steps(const ast_sweep_run *r, int64_t *steps, int64_t *per_epoch, ast_error *e)
{
    ast_cfg *cfg = ast_cfg_load_string(r->yaml, r->id, e);
    if (!cfg) return -1;
    *per_epoch = ast_cfg_int(cfg, "training.steps_per_epoch");
    *steps = ast_cfg_int(cfg, "training.epochs") * *per_epoch;
    ast_cfg_free(cfg);
    if (*steps > MAX_TABLE_STEPS) {
        ast_error_set(e, "run %s: a schedule over %lld steps is more than %lld; lower training.epochs or "
                         "training.steps_per_epoch", r->id, (long long)*steps, (long long)MAX_TABLE_STEPS);
        return -1;
    }
    return 0;
}

/* Calls the bound schedule at every step into one column per key it sets
 * (the learning rate, then the published names in the order it gives). */
static int fill_columns(const ast_train_config *tc, int64_t steps, int64_t per_epoch, ast_schedule_table *t,
                        ast_error *e)
{
    for (int64_t s = 0; s < steps; s++) {
        ast_schedule_values v = {.lr = NAN};
        if (tc->schedule(tc->schedule_ud, s, (int)(s / per_epoch), &v, e) < 0) return -1;
        if (s == 0) ast_schedule_table_init(t, steps, !isnan(v.lr), &v);
        ast_schedule_table_set(t, s, &v);
    }
    return 0;
}

int ast_sweep_tabulate_schedule(ast_sweep *s, const char *id, const char *path, ast_error *e)
{
    const ast_sweep_run *r = ast_sweep_find(s, id);
    ast_train_config tc = {0};
    int64_t steps, per_epoch;
    if (ast_sweep_bind_schedule(s, id, &tc, e) < 0 || run_steps(r, &steps, &per_epoch, e) < 0) return -1;
    ast_schedule_table t = {0};
    int rc = tc.schedule && steps > 0 ? fill_columns(&tc, steps, per_epoch, &t, e) : 0;
    if (rc == 0) rc = ast_schedule_table_save(&t, path, id, e);
    ast_schedule_table_free(&t);
    return rc;
}
