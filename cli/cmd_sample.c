/* `alphast-run sample RUN_DIR --out FILE`: generates the cells of a
 * held-out split with a trained run and writes them as CSV or .h5ad
 * (sample_write.c). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "eval/sample.h"
#include "model/kabsch.h"
#include "plugin/loader.h"
#include "train/train.h"
#include "cli.h"
#include "commands.h"
#include "run_setup.h"
#include "sample_write.h"

enum { OPT_OUT, OPT_MODE, OPT_SPLIT, OPT_STEPS, OPT_DEVICE, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_OUT] = {"out", 'o', "FILE", "FILE.csv or FILE.h5ad; - = CSV on stdout"},
    [OPT_MODE] = {"mode", 'm', "MODE", "expr_to_pos, pos_to_expr or joint (default: the run's training_mode)"},
    [OPT_SPLIT] = {"split", 's', "test|val", "held-out cells to generate (default test)"},
    [OPT_STEPS] = {"steps", 'n', "N", "network evaluations (default: the config's sampling.num_steps)"},
    [OPT_DEVICE] = CLI_DEVICE_OPTION,
};

static const cli_spec spec = {
    .name = "sample",
    .usage = "RUN_DIR --out FILE.csv|FILE.h5ad|- [--mode MODE] [--split test|val] [--steps N] [--device NAME]",
    .about = "Generates every cell of a held-out split with a trained run. The split is\n"
             "covered by neighbourhood sets; each cell is written once, from the first set\n"
             "that holds it. Coordinates are per set: centred on the set, in the run's length\n"
             "unit, and (being learned from distances) defined up to rotation and reflection;\n"
             "the true ones are given in the same frame. 2-D data gets x and y: each set's\n"
             "generated cells are turned onto their principal axes first, so the plane they\n"
             "lie in is x-y.\n"
             "CSV: cell,set,x,y[,z],x_true,y_true[,z_true], then one column per gene when\n"
             "expression is generated. .h5ad: X = the generated expression, or when it is\n"
             "given the data's values as the file holds them (not the z-scores the model\n"
             "reads), obs_names and obs columns the data's (joined by cell), then obs cell\n"
             "(row in the data) and set, obsm/spatial = positions (generated or given),\n"
             "obsm/spatial_true, obsm/spatial_aligned = spatial moved onto spatial_true\n"
             "(rotation or reflection and translation per set, Kabsch), and uns/alphast =\n"
             "config, checkpoint, version, command and plugins (JSON: each plugin's kind,\n"
             "name, version, file and SHA-256).\n"
             "The dataset is the one the run trained on: config.yaml's data.path (the config's,\n"
             "or train's --data FILE, written there as an absolute path).\n"
             "--device cuda samples on a GPU (docs/gpu.md).",
    .options = options,
    .n_options = N_OPTS,
    .max_args = 1,
};

enum { BATCH = 16 }; /* sets per sampler call */

typedef struct batch {
    int B, N, G;
    int64_t centre[BATCH];
    int64_t *cells;  /* [BATCH, N] */
    char *own;       /* [BATCH, N]: written from this set */
    float *expr, *pos, *mask, *gen_expr, *gen_pos, *aligned; /* aligned: gen_pos moved onto pos, per set */
} batch;

static void batch_init(batch *b, int N, int G)
{
    *b = (batch){.N = N, .G = G};
    size_t cells = (size_t)BATCH * N;
    b->cells = ast_xmalloc(cells * sizeof *b->cells);
    b->own = ast_xcalloc(cells, 1);
    b->expr = ast_xmalloc(cells * G * sizeof(float)), b->gen_expr = ast_xmalloc(cells * G * sizeof(float));
    b->pos = ast_xmalloc(cells * 3 * sizeof(float)), b->gen_pos = ast_xmalloc(cells * 3 * sizeof(float));
    b->aligned = ast_xmalloc(cells * 3 * sizeof(float));
    b->mask = ast_xmalloc(cells * sizeof(float));
}

static void batch_free(batch *b)
{
    free(b->cells), free(b->own), free(b->expr), free(b->gen_expr), free(b->pos), free(b->gen_pos), free(b->mask);
    free(b->aligned);
}

/* Each set's generated positions: of 2-D data turned onto their principal
 * axes (flat: z, which is not written, dropped, so that the alignment is
 * one in the x-y plane), and moved onto the true ones (b->aligned). */
static void orient(batch *b, int flat)
{
    for (int i = 0; i < b->B; i++) {
        int64_t o = (int64_t)i * b->N;
        float *gen = b->gen_pos + o * 3;
        if (flat) {
            ast_positions_to_principal_axes(b->N, gen, b->mask + o);
            for (int j = 0; j < b->N; j++) gen[j * 3 + 2] = 0.0f;
        }
        ast_align_onto(b->N, gen, b->pos + o * 3, b->mask + o, b->aligned + o * 3);
    }
}

/* Samples the batch's sets and appends the cells they own. */
static void flush(batch *b, ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, const ast_set_sampler *sets,
                  sample_cells *out)
{
    int N = b->N, G = b->G;
    ast_rng unused; /* sets of held-out cells are neither rotated nor dropped out */
    ast_rng_seed(&unused, 0);
    for (int i = 0; i < b->B; i++)
        ast_make_set(sets, b->centre[i], &unused, b->expr + (int64_t)i * N * G, b->pos + (int64_t)i * N * 3, b->mask + (int64_t)i * N);
    ast_sampler_config call = *sc;
    call.seed = sc->seed + (uint64_t)out->sets; /* a fresh stream per batch */
    ast_sample(m, s, &call, b->B, N, b->expr, b->pos, b->mask, b->gen_expr, b->gen_pos);
    orient(b, sets->d->coord_dims == 2 && ast_mode_noises(sc->mode, AST_MOD_POS));
    for (int i = 0; i < b->B; i++, out->sets++)
        for (int j = 0; j < N; j++) {
            int64_t k = (int64_t)i * N + j, r = out->n;
            if (!b->own[k]) continue;
            out->cell[r] = b->cells[k], out->set[r] = out->sets;
            memcpy(out->expr + r * G, b->gen_expr + k * G, (size_t)G * sizeof(float));
            memcpy(out->pos + r * 3, b->gen_pos + k * 3, 3 * sizeof(float));
            memcpy(out->pos_true + r * 3, b->pos + k * 3, 3 * sizeof(float));
            memcpy(out->pos_aligned + r * 3, b->aligned + k * 3, 3 * sizeof(float));
            out->n++;
        }
    b->B = 0;
}

static void generate(ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, const ast_set_sampler *sets,
                     sample_cells *out)
{
    const ast_split *split = sets->split;
    int N = sets->set_size, G = sets->d->n_genes;
    *out = (sample_cells){.G = G};
    out->cell = ast_xmalloc((size_t)split->n * sizeof *out->cell), out->set = ast_xmalloc((size_t)split->n * sizeof *out->set);
    out->expr = ast_xmalloc((size_t)split->n * G * sizeof(float));
    out->pos = ast_xmalloc((size_t)split->n * 3 * sizeof(float)), out->pos_true = ast_xmalloc((size_t)split->n * 3 * sizeof(float));
    out->pos_aligned = ast_xmalloc((size_t)split->n * 3 * sizeof(float));
    char *covered = ast_xcalloc((size_t)sets->d->n_cells, 1);
    batch b;
    batch_init(&b, N, G);
    for (int64_t i = 0; i < split->n; i++) {
        if (covered[split->cells[i]]) continue;
        int64_t *cells = b.cells + (int64_t)b.B * N;
        int n = ast_set_cells(sets, split->cells[i], cells);
        for (int j = 0; j < N; j++) {
            b.own[(int64_t)b.B * N + j] = j < n && !covered[cells[j]];
            if (j < n) covered[cells[j]] = 1;
        }
        b.centre[b.B++] = split->cells[i];
        if (b.B == BATCH) flush(&b, m, s, sc, sets, out);
    }
    if (b.B) flush(&b, m, s, sc, sets, out);
    batch_free(&b);
    free(covered);
}

static void sample_cells_free(sample_cells *g)
{
    free(g->cell), free(g->set), free(g->expr), free(g->pos), free(g->pos_true), free(g->pos_aligned);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The given expression of the cells as the data file holds it, into
 * g->expr: read again, since the dataset holds it normalised. */
static int expression_as_read(cli_run *r, sample_cells *g, ast_error *e)
{
    ast_data_opts o;
    ast_dataset raw;
    ast_data_opts_from_cfg(r->cfg, &o); /* data.path and data.coords_file are absolute since the load */
    if (ast_data_read(ast_cfg_str(r->cfg, "data.path"), &o, &raw, e) < 0) return -1;
    float *x = cli_rows_as_read(&raw, r->d.genes, r->d.n_genes, g->cell, g->n, e);
    ast_dataset_free(&raw);
    if (!x) return -1;
    free(g->expr);
    g->expr = x;
    return 0;
}

/* uns/alphast: what made the file. X: the generated expression, else
 * the data's as read. */
static int write_h5ad(const char *path, sample_cells *g, cli_run *r, int given_expr, int argc, char **argv,
                      ast_error *e)
{
    if (given_expr && expression_as_read(r, g, e) < 0) return -1;
    char *config = ast_cfg_dump_string(r->cfg, e), weights[PATH_MAX];
    if (!config) return -1;
    char *command = sample_command_line(argc, argv), *plugins = ast_plugins_provenance(e);
    const char *provenance[] = {"config", config, "checkpoint", realpath(r->weights, weights) ? weights : r->weights,
                                "version", PACKAGE_VERSION, "command", command, "plugins", plugins, NULL};
    int rc = plugins ? sample_write_h5ad(path, g, &r->d, provenance, e) : -1;
    free(config), free(command), free(plugins);
    return rc;
}

/* v[OPT_MODE] and v[OPT_SPLIT] are valid here. */
static int sample(cli_run *r, const char **v, const char *dir, int argc, char **argv, ast_error *e)
{
    ast_train_config tc;
    ast_sampler_config sc;
    if (cli_sampler_config(r->cfg, v[OPT_MODE], v[OPT_STEPS], &tc, &sc, e) < 0) return -1;
    int which = v[OPT_SPLIT] ? cli_split_parse(v[OPT_SPLIT]) : AST_SPLIT_TEST;
    ast_set_sampler sets = cli_eval_sets(r->cfg, &r->d, r->sp, which);
    if (sets.split->n < 1) {
        ast_error_set(e, "%s: the %s split is empty; nothing to sample", dir, cli_split_name(which));
        return -1;
    }
    ast_schedule s;
    if (ast_schedule_init(&s, tc.diffusion_steps, tc.nu_expression, tc.nu_position, e) < 0) return -1;
    sample_cells g;
    generate(r->m, &s, &sc, &sets, &g);
    ast_schedule_free(&s);
    const char *out = v[OPT_OUT];
    int gen_expr = ast_mode_noises(sc.mode, AST_MOD_EXPR);
    int rc = ends_with(out, ".h5ad") ? write_h5ad(out, &g, r, !gen_expr, argc, argv, e)
                                     : sample_write_csv(out, &g, &r->d, gen_expr, e);
    if (rc == 0) /* stdout may be the CSV's */
        fprintf(strcmp(out, "-") ? stdout : stderr, "%s: %lld %s cells (%d sets, %s) generated by %s, written to %s\n",
                dir, (long long)g.n, cli_split_name(which), g.sets, ast_sample_return_name(sc.ret),
                ast_mode_name(sc.mode), strcmp(out, "-") ? out : "stdout");
    sample_cells_free(&g);
    return rc;
}

int cmd_sample(int argc, char **argv)
{
    const char *v[N_OPTS], *args[1];
    int n_args;
    int rc = cli_refuse_data("sample", argc, argv);
    if (rc == CLI_CONTINUE) rc = cli_parse(&spec, argc, argv, v, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    if (n_args < 1) return cli_usage_error("sample", "missing RUN_DIR");
    if (!v[OPT_OUT] || !(!strcmp(v[OPT_OUT], "-") || ends_with(v[OPT_OUT], ".csv") || ends_with(v[OPT_OUT], ".h5ad")))
        return cli_usage_error("sample", "--out FILE.csv, --out FILE.h5ad or --out - (CSV on stdout) is required");
    ast_train_mode mode;
    if (v[OPT_MODE] && ast_mode_parse(v[OPT_MODE], &mode) < 0)
        return cli_usage_error("sample", "--mode must be expr_to_pos, pos_to_expr or joint (got '%s')", v[OPT_MODE]);
    if (v[OPT_SPLIT] && cli_split_parse(v[OPT_SPLIT]) < 0)
        return cli_usage_error("sample", "--split must be test or val (got '%s')", v[OPT_SPLIT]);
    ast_error e = {""};
    cli_run r;
    rc = cli_run_open(&r, args[0], NULL, 0, v[OPT_DEVICE], &e);
    if (rc == 0) rc = sample(&r, v, args[0], argc, argv, &e);
    cli_run_close(&r);
    return rc < 0 ? cli_fail(&e) : CLI_OK;
}
