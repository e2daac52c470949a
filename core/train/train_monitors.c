/* The config's monitor plugins in the training loop. Each observes, with
 * its own sink tagged with its name writing into the run's metrics.jsonl:
 * - after every optimiser step, once its loss has been read: the
 *   statistics the step's last micro-batch published (ast_ctx_stats) plus
 *   the gradient norms below (taken after backward, before clipping), with
 *   the number the step is logged under. On a device both are reduced
 *   there and copied to pinned memory with the step (a captured step
 *   included), so observing them waits for nothing more;
 * - at the end of every epoch, before validation: no statistics.
 * Gradient norms (L2 over every element of the groups' gradients):
 *   grad.total   all parameters;
 *   grad.router  names containing "router." (the MoE gates, their noise and
 *                time projections);
 *   grad.time    the diffusion-time branch: the time encoder
 *                mlp_in_diffusion_time.*, each layer's attn_model.y_y.*,
 *                lin_diffusion_time_*, norm_diffusion_time_* and the MoE
 *                router's time_proj.* (so time_proj counts in both).
 * A group with no parameters is not published. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/crash.h"
#include "plugin/loader.h"
#include "engine/backend.h"
#include "engine/sink.h"
#include "train/metrics_jsonl.h"
#include "train_internal.h"

typedef struct train_monitor {
    const ast_plugin_desc *desc;
    void *self;
    ast_sink *sink; /* made on the first observation, once metrics.jsonl is open */
} train_monitor;

enum { GRAD_TOTAL, GRAD_ROUTER, GRAD_TIME, N_GRAD };
static const char *const grad_stat_names[N_GRAD] = {"grad.total", "grad.router", "grad.time"};

struct train_monitors {
    train_monitor *items;
    int n;
    /* What the last queued step publishes: its statistics (names copied,
     * values where the host finds them after the step) followed by the
     * gradient norms, and each group's sum of squares there (NULL: the
     * group has no parameters). A replayed graph publishes into the same
     * places as the step it was captured from. */
    ast_stat *stats;
    int n_stats, cap;
    char *names;
    const double *grad_sq[N_GRAD];
    float grad[N_GRAD];
};

static int in_time_branch(const char *name)
{
    static const char *const parts[] = {".attn_model.y_y.", "lin_diffusion_time", "norm_diffusion_time",
                                        "router.time_proj."};
    if (!strncmp(name, "mlp_in_diffusion_time.", strlen("mlp_in_diffusion_time."))) return 1;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (strstr(name, parts[i])) return 1;
    return 0;
}

static int in_group(const ast_tensor *w, int g)
{
    return g == GRAD_TOTAL || (g == GRAD_ROUTER ? w->name && strstr(w->name, "router.") != NULL
                                                : w->name && in_time_branch(w->name));
}

/* Queues each group's sum of squares of the gradients into step memory
 * and its copy to where the host reads it after the step: the backend
 * sums in the fixed order of its blocks, so a norm repeats bit for bit,
 * and nothing waits. */
static void queue_grad_sums(train_monitors *tm, ast_ctx *c, ast_params *p)
{
    const ast_backend *b = ast_params_backend(p);
    int count = ast_params_count(p);
    float **xs = ast_xcalloc((size_t)count + 1, sizeof *xs);
    int64_t *ns = ast_xcalloc((size_t)count + 1, sizeof *ns);
    for (int g = 0; g < N_GRAD; g++) {
        int members = 0;
        for (int i = 0; i < count; i++) {
            ast_tensor *w = ast_params_at(p, i);
            if (!in_group(w, g)) continue;
            xs[members] = w->grad, ns[members] = w->size;
            members++;
        }
        tm->grad_sq[g] = NULL;
        if (!members) continue;
        double *sq = ast_data_alloc_uninit(c, sizeof *sq);
        b->sum_squares(b, xs, ns, members, sq);
        tm->grad_sq[g] = ast_ctx_read_later(c, sq, sizeof *sq);
    }
    free(xs), free(ns);
}

/* The step's statistics, kept past the context's reset (a validation pass
 * resets it before a replayed step is observed). */
static void keep_stats(train_monitors *tm, const ast_ctx *c)
{
    int n = ast_ctx_n_stats(c);
    const ast_stat *s = ast_ctx_stats(c);
    if (n + N_GRAD > tm->cap) tm->stats = ast_xrealloc(tm->stats, (size_t)(tm->cap = n + N_GRAD) * sizeof *tm->stats);
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(s[i].name) + 1;
    char *at = tm->names = ast_xrealloc(tm->names, len);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(s[i].name) + 1;
        tm->stats[i] = s[i];
        tm->stats[i].name = memcpy(at, s[i].name, l);
        at += l;
    }
    tm->n_stats = n;
}

void train_monitors_queue(ast_trainer *t)
{
    train_monitors *tm = t->monitors;
    if (!tm) return;
    keep_stats(tm, t->ctx);
    queue_grad_sums(tm, t->ctx, ast_model_params(t->model));
}

/* Appends the gradient norms after the step's statistics; their count. */
static int with_grad_norms(train_monitors *tm)
{
    int n = tm->n_stats;
    for (int g = 0; g < N_GRAD; g++) {
        if (!tm->grad_sq[g]) continue;
        tm->grad[g] = (float)sqrt(*tm->grad_sq[g]);
        tm->stats[n++] = (ast_stat){grad_stat_names[g], -1, 1, &tm->grad[g]};
    }
    return n;
}

void train_monitors_observe(ast_trainer *t, ast_phase phase)
{
    train_monitors *tm = t->monitors;
    if (!tm) return;
    ast_observation o = {.phase = phase, .step = t->step, .epoch = t->epoch};
    if (phase == AST_PHASE_TRAIN_STEP) {
        const ast_backend *b = ast_ctx_backend(t->ctx);
        b->synchronize(b); /* the step's copies are in (the loss's read has mostly waited for them) */
        o.n_stats = with_grad_norms(tm);
        o.stats = tm->stats;
        o.step = t->step + 1; /* observed before the update that makes it step t->step + 1 */
    }
    for (int i = 0; i < tm->n; i++) {
        train_monitor *m = &tm->items[i];
        if (!m->sink) m->sink = ast_sink_new(t->metrics, ast_metrics_write_monitor, m->desc->name);
        ast_sink_set_step(m->sink, o.step, o.epoch);
        o.sink = m->sink;
        ast_crash_scope saved;
        ast_crash_enter(&saved, "observe of monitor plugin", m->desc->name, NULL, -1);
        m->desc->observe(m->self, &o);
        ast_crash_leave(&saved);
    }
}

void train_monitors_free(train_monitors *tm)
{
    if (!tm) return;
    for (int i = 0; i < tm->n; i++) {
        ast_plugin_destroy(tm->items[i].desc, tm->items[i].self);
        ast_sink_free(tm->items[i].sink);
    }
    free(tm->items);
    free(tm->stats);
    free(tm->names);
    free(tm);
    ast_plugins_shutdown();
}

/* An instance of the plugin with the config's options, or NULL with e set. */
static void *build_monitor(const ast_plugin *p, const ast_cfg_plugin *cp, ast_error *e)
{
    const ast_plugin_desc *d = ast_plugin_desc_of(p);
    ast_optval *opts = ast_xcalloc((size_t)d->n_options + 1, sizeof *opts);
    void *self = NULL;
    if (ast_plugin_options(p, cp->opts, cp->n_opts, opts, e)) {
        char err[512] = "";
        ast_crash_scope saved;
        ast_crash_enter(&saved, "create of monitor plugin", d->name, ast_plugin_path(p), -1);
        self = d->create(&(ast_create_args){.host = ast_host_table(), .opts = opts, .backend = "cpu"}, err, sizeof err);
        ast_crash_leave(&saved);
        if (!self)
            ast_error_set(e, "%s: monitor '%s' could not be built: %s", cp->where, cp->name,
                          err[0] ? err : "no reason given");
    }
    free(opts);
    return self;
}

static int add_monitor(train_monitors *tm, const ast_cfg_node *node, ast_error *e)
{
    ast_cfg_plugin cp;
    ast_cfg_plugin_of(node, &cp);
    const ast_plugin *p = ast_plugin_load(AST_KIND_MONITOR, cp.name, e);
    if (!p) {
        ast_error why = *e;
        ast_error_set(e, "%s: monitors: %s", cp.where, why.msg);
        return -1;
    }
    void *self = build_monitor(p, &cp, e);
    if (!self) return -1;
    tm->items[tm->n++] = (train_monitor){ast_plugin_desc_of(p), self, NULL};
    return 0;
}

int ast_trainer_add_monitors(ast_trainer *t, const ast_cfg *cfg, ast_error *e)
{
    const ast_cfg_node *list = ast_cfg_get(cfg, "monitors");
    if (!list || list->kind != AST_CFG_SEQ || list->n_items == 0) return 0;
    /* Our own reference on the plugin registry keeps the monitors' code
     * loaded until train_monitors_free. */
    if (!ast_plugins_init(e)) return -1;
    train_monitors *tm = ast_xcalloc(1, sizeof *tm);
    tm->items = ast_xcalloc((size_t)list->n_items, sizeof *tm->items);
    for (int i = 0; i < list->n_items; i++)
        if (add_monitor(tm, list->items[i], e) < 0) {
            train_monitors_free(tm);
            return -1;
        }
    train_monitors_free(t->monitors);
    t->monitors = tm;
    ast_ctx_set_stats(t->ctx, 1); /* what the monitors observe */
    return 0;
}
