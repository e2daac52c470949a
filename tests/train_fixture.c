#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_fixture.h"

void train_setup_open(train_setup *s, const char *yaml, const char *const *overrides)
{
    ast_error e = {""};
    memset(s, 0, sizeof *s);
    s->cfg = ast_cfg_load_string(yaml, "tiny.yaml", &e);
    cr_assert(s->cfg, "%s", e.msg);
    for (; overrides && *overrides; overrides++) cr_assert(ast_cfg_override(s->cfg, *overrides, &e) == 0, "%s", e.msg);
    ast_data_opts o;
    ast_data_opts_from_cfg(s->cfg, &o);
    cr_assert(ast_data_read(ALPHAST_SOURCE_DIR "/data/starmap3d/starmap3d.h5ad", &o, &s->d, &e) == 0, "%s", e.msg);
    cr_assert(ast_data_preprocess(&s->d, &o, &e) == 0, "%s", e.msg);
    cr_assert(ast_data_split(&s->d, 0.1, 0.1, s->sp, &e) == 0, "%s", e.msg);
    cr_assert(ast_cfg_model(s->cfg, s->d.n_genes, &s->mc, &e) == 0, "%s", e.msg);
    cr_assert(ast_train_config_from_cfg(s->cfg, &s->tc, &e) == 0, "%s", e.msg);
    s->tc.progress = 0;
}

void train_setup_close(train_setup *s)
{
    ast_split_free(s->sp);
    ast_dataset_free(&s->d);
    ast_cfg_free(s->cfg);
}

char *train_tmp_dir(const char *tag)
{
    static char buf[4][96];
    static int i;
    char *d = buf[i++ % 4];
    snprintf(d, sizeof buf[0], "/tmp/alphast-%s-XXXXXX", tag);
    cr_assert(mkdtemp(d));
    return d;
}

double *train_setup_losses(const train_setup *s, const char *dir, int64_t *n, ast_train_result *r, int *graph)
{
    ast_error e = {""};
    ast_model *m = ast_model_new(&s->mc, s->tc.seed, &e);
    cr_assert(m, "%s", e.msg);
    ast_trainer *t = ast_trainer_new(m, &s->d, s->sp, &s->tc, dir, NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert(ast_trainer_resume(t, &e) >= 0, "%s", e.msg);
    cr_assert(ast_trainer_run(t, r, &e) == 0, "%s", e.msg);
    *n = ast_trainer_n_losses(t);
    double *losses = malloc((size_t)(*n + 1) * sizeof *losses);
    if (*n) memcpy(losses, ast_trainer_losses(t), (size_t)*n * sizeof *losses); /* NULL after no step */
    if (graph) *graph = ast_trainer_cuda_graph(t);
    ast_trainer_free(t);
    ast_model_free(m);
    return losses;
}
