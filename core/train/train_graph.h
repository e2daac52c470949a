/* train/train_graph.h: the training step as a captured graph on a device
 * (engine/graph.h), replayed step after step. */
#ifndef ALPHAST_TRAIN_GRAPH_H
#define ALPHAST_TRAIN_GRAPH_H

#include "engine/graph.h"
#include "train/train.h"

typedef enum train_graph_state {
    TRAIN_GRAPH_UNDECIDED, /* the first step sends what is sent once (AdamW's job table) */
    TRAIN_GRAPH_WARM,      /* the second will tell */
    TRAIN_GRAPH_PROBED,    /* an eager step made no host traffic: capture the next */
    TRAIN_GRAPH_ON,
    TRAIN_GRAPH_OFF
} train_graph_state;

typedef struct train_graph {
    train_graph_state state;
    ast_graph *graph;
    ast_graph *update;    /* over several ranks: the monitors and AdamW, after the sums */
    const float *loss_at; /* the loss in the graph's arena */
    /* The scheduled values the graph was captured with: plugins read them
     * on the host, into kernel arguments, so a change means a new capture. */
    ast_schedule_values captured_with;
} train_graph;

/* train_graph_step's answer when the step is the eager path's to run. */
#define TRAIN_GRAPH_NOT_USED 1

/* One update of the training step through the graph path: the batch
 * drawn on the host, then forward, backward, clipping and AdamW queued
 * (eagerly the first time, captured the second, replayed after; while a
 * replay runs, the next step's batch is drawn), the loss and norm read
 * once at the end. 0, -1 when the loss or the gradient's
 * norm is not finite (nothing updated), or TRAIN_GRAPH_NOT_USED when the
 * run cannot use it (the CPU, training.cuda_graph: false, accumulation,
 * ALPHAST_PROFILE, a step that reads device memory on the host: said once
 * in the log). Over several ranks the loss is read and summed over them
 * between the forward and backward's graph and the update's. The monitors
 * observe the step after the loss's read, from what the step copied into
 * pinned memory. */
int train_graph_step(ast_trainer *t, double *loss, double *gnorm);
void train_graph_free(train_graph *g);

#endif
