/* A schedule as a table of values per optimiser step, saved as
 * safetensors: one F32 tensor [steps] per scheduled key ("lr" for the
 * learning rate, the published names such as "moe.router_noise" for the
 * others). The sweep writes it (ast_sweep_tabulate_schedule); training
 * reads it (train --schedule FILE.safetensors) instead of evaluating the
 * sweep script again. */
#ifndef ALPHAST_SCHEDULE_TABLE_H
#define ALPHAST_SCHEDULE_TABLE_H

#include "train/train.h"

typedef struct ast_schedule_table {
    int64_t steps;
    int has_lr;
    float *lr;                          /* [steps] when has_lr */
    int n;                              /* named columns */
    char *names[AST_MAX_SCHEDULED];
    float *values[AST_MAX_SCHEDULED];   /* [steps] each */
    char *source;                       /* the file, for messages */
} ast_schedule_table;

/* Columns for the keys step 0 sets: the learning rate if has_lr, and
 * first's named values. */
void ast_schedule_table_init(ast_schedule_table *t, int64_t steps, int has_lr, const ast_schedule_values *first);
void ast_schedule_table_set(ast_schedule_table *t, int64_t step, const ast_schedule_values *v);
void ast_schedule_table_free(ast_schedule_table *t);

/* Atomic; `run` goes to the metadata. 0 or -1 with e set. */
int ast_schedule_table_save(const ast_schedule_table *t, const char *path, const char *run, ast_error *e);
/* Every column finite and >= 0, all of one length. 0 or -1 with e set. */
int ast_schedule_table_load(ast_schedule_table *t, const char *path, ast_error *e);

/* An ast_schedule_fn over a loaded table (ud = the table): a step past its
 * end is an error (the config changed since the sweep wrote it). */
int ast_schedule_table_lookup(void *ud, int64_t step, int epoch, ast_schedule_values *v, ast_error *e);

#endif
