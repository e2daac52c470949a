/* `alphast-run sample RUN_DIR --out FILE`: generates the cells of a
 * held-out split with a trained run and writes them as CSV or .h5ad
 * (sample_write.c). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "eval/evaluate.h"
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
    .about = "Generates the cells of a held-out split with a trained run, in the sets eval\n"
             "scores (evaluation.protocol: regions of the split, each split by expression\n"
             "into sets of at most evaluation.max_set_size; oracle_neighbourhoods:\n"
             "evaluation.sets true-position neighbourhoods), with eval's noise (evaluation.seed):\n"
             "scoring the written placement gives eval.json's numbers. Each cell is written\n"
             "once, from the first set that holds it. Coordinates are per set: centred on\n"
             "the set, in the run's length unit, and (being learned from distances) defined up\n"
             "to rotation and reflection; the true ones are given in the same frame. 2-D data\n"
             "gets x and y: each set's generated cells are turned onto their principal axes\n"
             "and z dropped, as eval scores them.\n"
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

/* The placement of the sets (gen_pos, as sampled) and of 2-D data turned
 * onto each set's principal axes with z dropped, as eval scores it; and
 * moved onto the true positions (aligned). */
static void orient(const ast_eval_sets *t, int flat, float *gen_pos, float *aligned)
{
    if (flat) ast_positions_flatten(t->B, t->N, gen_pos, t->mask);
    for (int b = 0; b < t->B; b++) {
        int64_t o = (int64_t)b * t->N;
        ast_align_onto(t->N, gen_pos + o * 3, t->pos + o * 3, t->mask + o, aligned + o * 3);
    }
}

static void sample_cells_init(sample_cells *out, int64_t n, int G)
{
    *out = (sample_cells){.G = G};
    out->cell = ast_xmalloc((size_t)n * sizeof *out->cell), out->set = ast_xmalloc((size_t)n * sizeof *out->set);
    out->expr = ast_xmalloc((size_t)n * G * sizeof(float));
    out->pos = ast_xmalloc((size_t)n * 3 * sizeof(float)), out->pos_true = ast_xmalloc((size_t)n * 3 * sizeof(float));
    out->pos_aligned = ast_xmalloc((size_t)n * 3 * sizeof(float));
}

/* The sets eval scores (ast_eval_make_sets), generated with sc; each cell
 * written once, from the first set that holds it (the region protocol's
 * sets hold each cell once; oracle neighbourhoods may overlap). */
static void generate(ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, const ast_set_sampler *sets,
                     const ast_eval_config *ec, sample_cells *out)
{
    ast_eval_sets t;
    ast_eval_make_sets(sets, ec, &t);
    size_t cells = (size_t)t.B * t.N;
    float *gen_expr = ast_xmalloc(cells * t.G * sizeof(float)), *gen_pos = ast_xmalloc(cells * 3 * sizeof(float));
    float *aligned = ast_xmalloc(cells * 3 * sizeof(float));
    char *written = ast_xcalloc((size_t)sets->d->n_cells, 1);
    ast_sample(m, s, sc, t.B, t.N, t.expr, t.pos, t.mask, gen_expr, gen_pos);
    orient(&t, sets->d->coord_dims == 2 && ast_mode_noises(sc->mode, AST_MOD_POS), gen_pos, aligned);
    sample_cells_init(out, sets->split->n, t.G);
    out->sets = t.B;
    for (size_t k = 0; k < cells; k++) {
        int64_t cell = t.cells[k], r = out->n;
        if (cell < 0 || written[cell]) continue;
        written[cell] = 1;
        out->cell[r] = cell, out->set[r] = (int)(k / t.N);
        memcpy(out->expr + r * t.G, gen_expr + k * t.G, (size_t)t.G * sizeof(float));
        memcpy(out->pos + r * 3, gen_pos + k * 3, 3 * sizeof(float));
        memcpy(out->pos_true + r * 3, t.pos + k * 3, 3 * sizeof(float));
        memcpy(out->pos_aligned + r * 3, aligned + k * 3, 3 * sizeof(float));
        out->n++;
    }
    free(gen_expr), free(gen_pos), free(aligned), free(written);
    ast_eval_sets_free(&t);
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
    ast_eval_config ec;
    if (ast_eval_config_from_cfg(r->cfg, &r->d, &ec, e) < 0) return -1;
    if (ast_schedule_init(&s, tc.diffusion_steps, tc.nu_expression, tc.nu_position, e) < 0) {
        ast_eval_config_free(&ec);
        return -1;
    }
    sample_cells g;
    generate(r->m, &s, &sc, &sets, &ec, &g);
    ast_schedule_free(&s);
    ast_eval_config_free(&ec);
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
