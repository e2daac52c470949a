/* engine/graph.h: a step captured once and replayed with one launch (a CUDA
 * graph), for the callers that loop over steps (the trainer, the bench).
 *
 * Between ast_graph_begin and ast_graph_end the caller runs one step as
 * usual; nothing runs, the backend records it. ast_graph_replay runs it
 * again: the same kernels on the same addresses (the graph keeps the
 * arena's buffers it was captured into; the context gets fresh ones), the
 * copies from pinned host memory reading what is there when it runs (the
 * caller's step inputs), and new random keys drawn from the context's RNG
 * in the order the step drew them.
 *
 * A step can be captured when it makes the host wait for nothing: no read
 * of device data, no copy from pageable memory, no draw from the RNG other
 * than a kernel's key (ast_graph_traffic counts them over an eager step, so
 * a caller knows before it tries). The CPU backend captures nothing. */
#ifndef ALPHAST_GRAPH_H
#define ALPHAST_GRAPH_H

#include "engine/backend.h"

typedef struct ast_graph ast_graph;

/* What makes a step uncapturable, counted since the context was made:
 * copies that made the host wait (backend.h's host_traffic, this thread)
 * plus RNG draws that were not kernel keys (host->rng_*). */
int64_t ast_graph_traffic(const ast_ctx *c);

/* 0, or -1 with why (the backend captures nothing: the CPU). */
int ast_graph_begin(ast_ctx *c, char *why, size_t n);
/* The graph of what was queued since ast_graph_begin, or NULL with why.
 * Nothing of it ran: the context's RNG is back where the capture began,
 * so the first replay draws the keys an eager step would have. */
ast_graph *ast_graph_end(ast_ctx *c, char *why, size_t n);
/* Queues one run of the step; the caller synchronises before it reads
 * results or writes the inputs of the next. */
void ast_graph_replay(ast_graph *g);
void ast_graph_free(ast_graph *g);

#endif
