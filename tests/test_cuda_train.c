/* The trainer on the GPU with its step captured as a CUDA graph
 * (training.cuda_graph, train_graph.c) against the same run op by op: the
 * same losses bit for bit, validation and checkpoints in between; and the
 * runs that cannot be captured (MoE routing on the host) train op by op.
 * Skipped, saying why, without CUDA in the build or without a GPU. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fixture.h"
#include "train/train.h"
#include "train_fixture.h"

static const char *tiny_yaml =
    "device: cuda\n"
    "training_mode: joint\n"
    "data: {set_size: 12, preprocessing: {position_key: spatial, cell_type_key: null},\n"
    "       loading: {rotation: true, expression_dropout: 0.1}}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 3, steps_per_epoch: 4, val_sets: 4,\n"
    "           val_t_points: 2, early_stopping: false, scheduler: {type: cosine, T_max: 3}}\n"
    TINY_MODEL_YAML
    "attention: gated\n";

/* The losses of a run with `graph`, `ffn` and position loss `pos`;
 * malloc'd, *n of them. */
static double *train_losses(const char *graph, const char *ffn, const char *pos, int64_t *n, int *replayed)
{
    cf_gpu();
    char g[64], f[64], l[64];
    snprintf(g, sizeof g, "training.cuda_graph=%s", graph);
    snprintf(f, sizeof f, "ffn=%s", ffn);
    snprintf(l, sizeof l, "loss.position_loss=%s", pos);
    const char *const overrides[] = {g, f, "TransformerLayer_setting.dropout=0.2", l, NULL};
    train_setup s;
    train_setup_open(&s, tiny_yaml, overrides);
    ast_train_result r;
    double *losses = train_setup_losses(&s, "cuda-graph", n, &r, replayed);
    train_setup_close(&s);
    return losses;
}

static void check_same(const char *ffn, const char *pos, int expect_graph)
{
    int64_t n_graph, n_ops;
    int replayed, replayed_off;
    double *graph = train_losses("true", ffn, pos, &n_graph, &replayed),
           *ops = train_losses("false", ffn, pos, &n_ops, &replayed_off);
    cr_assert_eq(replayed, expect_graph, "ffn %s, %s loss: the step %s a graph", ffn, pos,
                 replayed ? "became" : "did not become");
    cr_assert_not(replayed_off, "training.cuda_graph: false still captured the step");
    cr_assert_eq(n_graph, 12);
    cr_assert_eq(n_ops, n_graph);
    cr_assert_arr_eq(graph, ops, (size_t)n_ops * sizeof *ops, "ffn %s: the graph's losses are not the eager run's", ffn);
    cr_log_info("ffn %s: %lld steps over 3 epochs, graph and op by op: the same losses bit for bit (last %.6f)", ffn,
                (long long)n_ops, ops[n_ops - 1]);
    free(graph), free(ops);
}

Test(cuda_train, dense_run_replays_its_graph_with_the_same_losses) { check_same("dense", "distance", 1); }

/* The default aligned position loss runs on the device too (aligned_mse). */
Test(cuda_train, aligned_loss_run_replays_its_graph_with_the_same_losses) { check_same("dense", "aligned", 1); }

/* MoE routes in device memory (the plan ops, ABI 2.6): nothing waits for
 * the host, so the trainer captures its step, with the same numbers. */
Test(cuda_train, moe_run_replays_its_graph_with_the_same_losses) { check_same("moe", "distance", 1); }
