/* Schedules tabulated per optimiser step (schedule_table.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/strlist.h"
#include "io/safetensors.h"
#include "train/schedule_table.h"

#define LR_NAME "lr"

void ast_schedule_table_init(ast_schedule_table *t, int64_t steps, int has_lr, const ast_schedule_values *first)
{
    memset(t, 0, sizeof *t);
    t->steps = steps;
    t->has_lr = has_lr;
    if (has_lr) t->lr = ast_xcalloc((size_t)steps, sizeof(float));
    for (int i = 0; i < first->n; i++) {
        t->names[t->n] = ast_xstrdup(first->named[i].name);
        t->values[t->n++] = ast_xcalloc((size_t)steps, sizeof(float));
    }
}

void ast_schedule_table_set(ast_schedule_table *t, int64_t step, const ast_schedule_values *v)
{
    if (t->has_lr) t->lr[step] = v->lr;
    for (int i = 0; i < v->n && i < t->n; i++) t->values[i][step] = v->named[i].value;
}

void ast_schedule_table_free(ast_schedule_table *t)
{
    free(t->lr), free(t->source);
    for (int i = 0; i < t->n; i++) free(t->names[i]), free(t->values[i]);
    memset(t, 0, sizeof *t);
}

int ast_schedule_table_save(const ast_schedule_table *t, const char *path, const char *run, ast_error *e)
{
    ast_st_writer *w = ast_st_writer_new();
    int64_t shape[1] = {t->steps};
    if (t->has_lr) ast_st_writer_add(w, LR_NAME, AST_ST_F32, 1, shape, t->lr);
    for (int i = 0; i < t->n; i++) ast_st_writer_add(w, t->names[i], AST_ST_F32, 1, shape, t->values[i]);
    ast_st_writer_metadata(w, "alphast.schedule_table", "1");
    ast_st_writer_metadata(w, "run", run);
    int rc = ast_st_writer_write(w, path, e);
    ast_st_writer_free(w);
    return rc;
}

/* Column i of f into *out, checked: 1-D, `steps` long, finite, >= 0. */
static int read_column(const ast_st_file *f, int i, int64_t steps, float **out, ast_error *e)
{
    const char *name = ast_st_name(f, i);
    if (ast_st_ndim(f, i) != 1 || ast_st_shape(f, i)[0] != steps) {
        ast_error_set(e, "%s: schedule '%s' has %lld values, '%s' %lld; a table has one value per step for every key "
                         "(written by alphast-run sweep)", ast_st_path(f), name, (long long)ast_st_numel(f, i),
                      ast_st_name(f, 0), (long long)steps);
        return -1;
    }
    *out = ast_xmalloc((size_t)(steps ? steps : 1) * sizeof(float));
    if (ast_st_read_f32(f, name, 1, &steps, *out, e) < 0) return -1;
    for (int64_t s = 0; s < steps; s++)
        if ((*out)[s] < 0) {
            ast_error_set(e, "%s: schedule '%s' is %g at step %lld; scheduled values are >= 0", ast_st_path(f), name,
                          (*out)[s], (long long)s);
            return -1;
        }
    return 0;
}

/* The named values a table may hold: those the sweep tabulates, by the
 * names it publishes them under (sweep_schedule.c; the test
 * a_schedule_table_holds_every_step_of_the_run loads all of them). */
static const char *const scheduled[] = {"masking.ratio", "moe.load_balance_weight", "moe.router_noise"};
#define N_SCHEDULED ((int)(sizeof scheduled / sizeof scheduled[0]))

static int is_scheduled(const char *name)
{
    for (int k = 0; k < N_SCHEDULED; k++)
        if (!strcmp(name, scheduled[k])) return 1;
    return 0;
}

static int unknown_column(const char *path, const char *name, ast_error *e)
{
    ast_strlist known = {0};
    char list[256];
    ast_strlist_push(&known, LR_NAME);
    for (int k = 0; k < N_SCHEDULED; k++) ast_strlist_push(&known, scheduled[k]);
    ast_error_set(e, "%s: not a schedule table: column '%s' is not a value a schedule sets (%s); write the table "
                     "again with alphast-run sweep", path, name, ast_strlist_join(&known, ", ", "", list, sizeof list));
    ast_strlist_free(&known);
    return -1;
}

/* Checked before anything is read: the table has room for lr and
 * AST_MAX_SCHEDULED named columns, and each named one is a value a
 * schedule sets. */
static int check_columns(const ast_st_file *f, const char *path, ast_error *e)
{
    int count = ast_st_count(f), has_lr = 0;
    if (!ast_st_metadata(f, "alphast.schedule_table")) {
        ast_error_set(e, "%s: not a schedule table (alphast-run sweep writes them; a sweep script goes as "
                         "--schedule SCRIPT.lua:RUN)", path);
        return -1;
    }
    for (int i = 0; i < count; i++) has_lr |= !strcmp(ast_st_name(f, i), LR_NAME);
    if (count - has_lr > AST_MAX_SCHEDULED) {
        ast_error_set(e, "%s: not a schedule table: %d columns, at most %d named ones and " LR_NAME, path, count,
                      AST_MAX_SCHEDULED);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        const char *name = ast_st_name(f, i);
        if (strcmp(name, LR_NAME) && !is_scheduled(name)) return unknown_column(path, name, e);
    }
    return 0;
}

int ast_schedule_table_load(ast_schedule_table *t, const char *path, ast_error *e)
{
    memset(t, 0, sizeof *t);
    ast_st_file *f = ast_st_open(path, e);
    if (!f) return -1;
    int count = ast_st_count(f), rc = check_columns(f, path, e);
    t->steps = count ? ast_st_numel(f, 0) : 0;
    for (int i = 0; i < count && rc == 0; i++) {
        int is_lr = !strcmp(ast_st_name(f, i), LR_NAME);
        float **col = is_lr ? &t->lr : &t->values[t->n];
        if (!is_lr) t->names[t->n++] = ast_xstrdup(ast_st_name(f, i));
        t->has_lr |= is_lr;
        rc = read_column(f, i, t->steps, col, e);
    }
    ast_st_close(f);
    if (rc < 0) ast_schedule_table_free(t);
    else t->source = ast_xstrdup(path);
    return rc;
}

int ast_schedule_table_lookup(void *ud, int64_t step, int epoch, ast_schedule_values *v, ast_error *e)
{
    const ast_schedule_table *t = ud;
    if (step < 0 || step >= t->steps) {
        ast_error_set(e, "%s: the schedule has %lld steps and the run is at step %lld (epoch %d): the config changed "
                         "since the sweep wrote it; run the sweep again", t->source, (long long)t->steps,
                      (long long)step, epoch);
        return -1;
    }
    if (t->has_lr) v->lr = t->lr[step];
    for (int i = 0; i < t->n && v->n < AST_MAX_SCHEDULED; i++) {
        v->named[v->n].name = t->names[i];
        v->named[v->n++].value = t->values[i][step];
    }
    return 0;
}
