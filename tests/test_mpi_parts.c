/* The pieces of a run over MPI that need no MPI, in every build: which
 * launcher started the process and how many ranks, the split of items
 * over ranks, AdamW over a part of the parameters (ZeRO-1's), and, in a
 * build without MPI, the refusal of a launch of several ranks. The runs
 * over the real mpirun are tests/test_mpi.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/optim.h"
#include "train/train_dist.h"

static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"};

static void clear_launchers(void)
{
    for (size_t i = 0; i < sizeof launcher_vars / sizeof *launcher_vars; i++) unsetenv(launcher_vars[i]);
}

TestSuite(launch, .init = clear_launchers);

static int launched(const char **who)
{
    int ranks = -1;
    ast_error e = {""};
    cr_assert_eq(ast_dist_launched(&ranks, who, &e), 0, "%s", e.msg);
    return ranks;
}

Test(launch, each_launcher_says_how_many_ranks)
{
    const char *who;
    cr_assert_eq(launched(&who), 1);
    cr_assert_null(who);
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    cr_assert_eq(launched(&who), 4);
    cr_assert_str_eq(who, "SLURM_STEP_NUM_TASKS");
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1); /* mpirun inside a step of srun: mpirun's ranks */
    cr_assert_eq(launched(&who), 2);
    cr_assert_str_eq(who, "OMPI_COMM_WORLD_SIZE");
}

/* A batch script has SLURM_NTASKS of its whole allocation while it runs
 * one process, as do the single trainings a sweep starts in it. */
Test(launch, a_batch_script_is_one_process)
{
    const char *who;
    setenv("SLURM_NTASKS", "8", 1);
    cr_assert_eq(launched(&who), 1);
}

Test(launch, a_launcher_variable_must_be_a_number)
{
    const char *who;
    int ranks;
    ast_error e = {""};
    setenv("PMI_SIZE", "two", 1);
    cr_assert_eq(ast_dist_launched(&ranks, &who, &e), -1);
    cr_assert_str_eq(e.msg, "PMI_SIZE='two' in the environment is not a number of ranks; unset it, or launch with "
                            "mpirun -np R or srun -n R");
    setenv("PMI_SIZE", "0", 1);
    cr_assert_eq(ast_dist_launched(&ranks, &who, &e), -1);
}

Test(launch, items_split_in_contiguous_parts_differing_by_at_most_one)
{
    for (int size = 1; size <= 9; size++)
        for (int64_t n = 0; n <= 30; n++) {
            int64_t expect = 0, lo, hi, fewest = n, most = 0;
            for (int r = 0; r < size; r++) {
                ast_dist_part(n, r, size, &lo, &hi);
                cr_assert_eq(lo, expect, "n %lld, rank %d of %d", (long long)n, r, size);
                expect = hi;
                fewest = hi - lo < fewest ? hi - lo : fewest, most = hi - lo > most ? hi - lo : most;
            }
            cr_assert_eq(expect, n);
            cr_assert_leq(most - fewest, 1);
        }
}

/* Three parameters of 5, 300 and 7 elements with gradients. */
static ast_params *three_params(uint64_t seed)
{
    ast_params *p = ast_params_new(seed);
    ast_scope *s = ast_scope_new(p, "");
    int64_t sizes[3] = {5, 300, 7};
    const char *names[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        ast_tensor *x = ast_param(s, names[i], 1, &sizes[i], AST_INIT_NORMAL, 1.0f);
        for (int64_t j = 0; j < x->size; j++) x->grad[j] = 0.01f * (float)((j * 7 + i * 13) % 17) - 0.08f;
    }
    return p;
}

/* ZeRO-1: the optimisers of parts that tile the parameters, each stepping
 * its part, leave every weight with exactly the bits one optimiser of all
 * of them leaves (the update is elementwise), and hold the state of their
 * part only. A part boundary falls inside parameter b. */
Test(optim_part, parts_step_as_the_whole)
{
    ast_adamw_config cfg = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 1e-2f,
                            .amsgrad = 1};
    ast_params *whole = three_params(5), *split = three_params(5);
    ast_adamw *all = ast_adamw_new(whole, &cfg);
    int64_t cut[4] = {0, 100, 250, 312};
    ast_adamw *part[3];
    for (int k = 0; k < 3; k++) part[k] = ast_adamw_new_part(split, &cfg, cut[k], cut[k + 1] - cut[k]);
    cr_assert_eq(part[0]->len[0], 5);
    cr_assert_eq(part[0]->len[1], 95);
    cr_assert_eq(part[0]->len[2], 0);
    cr_assert_null(part[0]->m[2]);
    cr_assert_eq(part[1]->lo[1], 95);
    cr_assert_eq(part[1]->len[1], 150);
    cr_assert_eq(part[2]->lo[1], 245);
    cr_assert_eq(part[2]->len[1], 55);
    cr_assert_eq(part[2]->len[2], 7);
    for (int step = 0; step < 3; step++) {
        ast_adamw_step(all, 1e-2f);
        for (int k = 0; k < 3; k++) ast_adamw_step(part[k], 1e-2f);
    }
    for (int i = 0; i < 3; i++)
        cr_assert_arr_eq(ast_params_at(whole, i)->data, ast_params_at(split, i)->data,
                         (size_t)ast_params_at(whole, i)->size * sizeof(float), "parameter %d", i);
    for (int k = 0; k < 3; k++) ast_adamw_free(part[k]);
    ast_adamw_free(all);
    ast_params_free(whole), ast_params_free(split);
}

#ifndef ALPHAST_HAVE_MPI
/* Without MPI each of mpirun's ranks would train the whole run alone, into
 * the same directory: refused before anything is read. */
Test(launch, a_build_without_mpi_refuses_several_ranks)
{
    char out[] = "/tmp/alphast-mpi-parts-XXXXXX";
    close(mkstemp(out));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "OMPI_COMM_WORLD_SIZE=2 %s/alphast-run train --out /nonexistent/run 2>%s",
             ALPHAST_BUILD_DIR, out);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    FILE *f = fopen(out, "r");
    char text[1024] = "";
    cr_assert(f && fgets(text, sizeof text, f));
    fclose(f);
    remove(out);
    cr_assert_str_eq(text, "alphast-run: launched as 2 ranks (OMPI_COMM_WORLD_SIZE=2), but this alphast-run was "
                           "built without MPI, so each would train the whole run alone: configure --with-mpi "
                           "(apt-get install libopenmpi-dev openmpi-bin) and rebuild, or run it as one process\n");
}
#endif
