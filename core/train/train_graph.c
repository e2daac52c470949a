/* The training step as a captured graph (train_graph.h). The first two
 * steps run eagerly, the second counting what made the host wait (the
 * first also sends what is sent once); a step that made nothing wait is
 * captured next and replayed from then on, with the same
 * numbers as eager steps: the replay draws the same kernel keys from the
 * same RNG, and the batch, the times' coefficients and the AdamW constants
 * are rewritten in pinned memory before each replay. While a replay runs,
 * the host draws the next step's batch (may_draw_ahead).
 * Over several MPI ranks the step is two graphs: the forward and backward,
 * then, once the ranks have summed the gradients (train_ranks_reduce:
 * NCCL on the device, MPI for the loss and the buffers' changes), the
 * monitors and AdamW, in the order the eager step queues them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_graph.h"
#include "train_internal.h"

/* Why the run cannot capture its step, decided from its config; NULL if it can. */
static const char *config_refusal(const ast_trainer *t)
{
    if (ast_ctx_backend(t->ctx)->memory == AST_MEM_HOST) return "";
    if (!t->tc.cuda_graph) return "training.cuda_graph is false";
    if (t->tc.accumulate != 1) return "training.accumulate_grad_batches is above 1";
    if (getenv("ALPHAST_PROFILE")) return "ALPHAST_PROFILE waits for the device at every op";
    return NULL;
}

static void turn_off(train_graph *g, const char *why)
{
    g->state = TRAIN_GRAPH_OFF;
    if (why[0]) ast_log(AST_LOG_INFO, "the training step runs op by op, not as a CUDA graph: %s", why);
}

static int several_ranks(const ast_trainer *t) { return t->ranks.size > 1; }

/* Forward, backward, clipping and AdamW, queued; the loss tensor's data.
 * Over several ranks the forward and backward alone (queue_update's part
 * follows the ranks' sums). */
static const float *queue_step(ast_trainer *t)
{
    ast_params_zero_grad(ast_model_params(t->model));
    const float *loss = train_queue_micro_step(t)->data;
    if (several_ranks(t)) return loss;
    train_monitors_queue(t);
    ast_adamw_queue(t->opt, t->tc.clip_norm, loss);
    return loss;
}

/* Several ranks: the monitors and AdamW on the summed gradients (the loss
 * was checked on the host, as the eager step does). */
static void queue_update(ast_trainer *t)
{
    train_monitors_queue(t);
    ast_adamw_queue(t->opt, t->tc.clip_norm, NULL);
}

static void drop_graphs(train_graph *g)
{
    ast_graph_free(g->graph), ast_graph_free(g->update);
    g->graph = g->update = NULL;
}

/* The learning rate is staged each step; the named values are baked in. */
static int same_scheduled(const train_graph *g, const ast_schedule_values *v)
{
    if (v->n != g->captured_with.n) return 0;
    for (int i = 0; i < v->n; i++)
        if (memcmp(&g->captured_with.named[i].value, &v->named[i].value, sizeof(float))) return 0;
    return 1;
}

/* Captures the step and queues its first replay; 0, or -1 (the graph is
 * off, nothing was queued) with the reason logged. */
static int capture(ast_trainer *t, train_graph *g)
{
    char why[320];
    if (ast_graph_begin(t->ctx, why, sizeof why) < 0) return turn_off(g, why), -1;
    g->loss_at = queue_step(t);
    g->graph = ast_graph_end(t->ctx, why, sizeof why);
    if (!g->graph) return turn_off(g, why), -1;
    g->captured_with = t->scheduled;
    g->state = TRAIN_GRAPH_ON;
    ast_log(AST_LOG_INFO, "the training step is captured as a CUDA graph and replayed from step %lld",
            (long long)t->step + 1);
    ast_graph_replay(g->graph);
    return 0;
}

/* Queues this step: eagerly (and decides from its traffic), by a capture,
 * or by a replay. Returns the loss's device address. */
static const float *run_step(ast_trainer *t, train_graph *g)
{
    if (g->state == TRAIN_GRAPH_ON && !same_scheduled(g, &t->scheduled)) {
        drop_graphs(g);
        g->state = TRAIN_GRAPH_PROBED;
    }
    if (g->state == TRAIN_GRAPH_ON) {
        ast_graph_replay(g->graph);
        return g->loss_at;
    }
    if (g->state == TRAIN_GRAPH_PROBED && capture(t, g) == 0) return g->loss_at;
    int64_t before = ast_graph_traffic(t->ctx);
    const float *loss = queue_step(t);
    int64_t made = ast_graph_traffic(t->ctx) - before;
    if (g->state == TRAIN_GRAPH_WARM) {
        char why[240];
        snprintf(why, sizeof why, "the step waits for the host %lld time%s (a plugin or loss that reads device data "
                 "there, such as MoE routing, or draws random numbers on the host; ALPHAST_TRACE_TRAFFIC=1 shows where)",
                 (long long)made, made == 1 ? "" : "s");
        if (made) turn_off(g, why);
        else g->state = TRAIN_GRAPH_PROBED;
    }
    if (g->state == TRAIN_GRAPH_UNDECIDED) g->state = TRAIN_GRAPH_WARM;
    return loss;
}

/* Several ranks, after their sums: the update replayed, captured (the
 * step whose forward was captured), or queued eagerly. */
static void run_update(ast_trainer *t, train_graph *g)
{
    char why[320];
    if (g->state == TRAIN_GRAPH_ON && !g->update) {
        if (ast_graph_begin(t->ctx, why, sizeof why) == 0) {
            queue_update(t);
            g->update = ast_graph_end(t->ctx, why, sizeof why);
        }
        if (!g->update) { /* this step's forward ran from the graph, its update runs eagerly */
            drop_graphs(g);
            turn_off(g, why);
        }
    }
    if (g->state == TRAIN_GRAPH_ON) {
        ast_graph_replay(g->update);
        return;
    }
    int64_t before = ast_graph_traffic(t->ctx);
    queue_update(t);
    /* The probing step (run_step found its forward and backward capturable) counts this part too. */
    if (g->state == TRAIN_GRAPH_PROBED && ast_graph_traffic(t->ctx) != before)
        turn_off(g, "the update after the ranks' sums waits for the host (ALPHAST_TRACE_TRAFFIC=1 shows where)");
}

/* Whether the next step's batch may be drawn now, while the device runs a
 * replay of this one (the host is free until it reads the loss): the
 * draws are those the next step would make, as nothing between two steps
 * of an epoch draws from data_rng. Not at an epoch's last step
 * (validation, early stopping and the checkpoint come first) nor with
 * masking, whose draws follow the next step's schedule. */
static int may_draw_ahead(const ast_trainer *t)
{
    return t->graph.state == TRAIN_GRAPH_ON && !t->masking && t->epoch_step + 1 < t->tc.steps_per_epoch;
}

/* Into host memory of its own (allocated at the first draw; without it
 * the next step draws its batch itself). */
static void draw_ahead(ast_trainer *t)
{
    const ast_batch *b = &t->batch;
    ast_error e;
    if (!t->ahead.expr && ast_batch_init(&t->ahead, b->B, b->N, b->G, t->model, NULL, "batch drawn ahead", &e) < 0)
        return;
    t->rng_before_ahead = t->data_rng;
    train_draw_batch(t, &t->ahead);
    t->drawn_ahead = 1;
}

int train_graph_step(ast_trainer *t, double *loss, double *gnorm)
{
    train_graph *g = &t->graph;
    if (g->state == TRAIN_GRAPH_UNDECIDED) {
        const char *why = config_refusal(t);
        if (why) turn_off(g, why);
    }
    if (g->state == TRAIN_GRAPH_OFF) return TRAIN_GRAPH_NOT_USED;
    train_prepare_batch(t);
    if (several_ranks(t)) train_ranks_step_begin(t);
    else ast_adamw_stage(t->opt, t->scheduled.lr);
    const float *loss_at = run_step(t, g);
    if (may_draw_ahead(t)) draw_ahead(t);
    const ast_backend *b = ast_ctx_backend(t->ctx);
    float l;
    b->to_host(b, &l, loss_at, sizeof l);
    *loss = l;
    if (several_ranks(t)) {
        *loss = train_ranks_reduce(t, t->ranks.share * (double)l);
        if (!isfinite(*loss)) return -1;
        ast_adamw_stage(t->opt, t->scheduled.lr);
        run_update(t, g);
    }
    *gnorm = ast_adamw_norm(t->opt);
    train_monitors_observe(t, AST_PHASE_TRAIN_STEP);
    return isfinite(*loss) && isfinite(*gnorm) ? 0 : -1;
}

void train_graph_free(train_graph *g)
{
    drop_graphs(g);
    memset(g, 0, sizeof *g);
}
