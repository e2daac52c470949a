/* `alphast-run predict RUN_DIR --data FILE --out FILE`: places the cells
 * of a new dataset with a trained run, in one frame per section, or
 * generates the expression of the run's genes at given positions (--task
 * pos_to_expr). Sample's machinery on a dataset given on the command line:
 * the run's genes, preprocessing and length unit; to place, the
 * evaluation's expression-only sets made to overlap and stitched together
 * (eval/stitch.h); to generate expression, sets that are patches of each
 * section (ast_eval_sets_by_position). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic_file.h"
#include "base/csv.h"
#include "base/strlist.h"
#include "data/data_csr.h"
#include "eval/eval_sets.h"
#include "eval/stitch.h"
#include "cli.h"
#include "commands.h"
#include "run_setup.h"
#include "sample_write.h"

enum { OPT_DATA, OPT_OUT, OPT_TASK, OPT_STEPS, OPT_ALLOW_MISSING, OPT_SLICE_KEY, OPT_POSITION_KEY, OPT_DEVICE, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_DATA] = {"data", 'd', "FILE", "the cells: .h5ad, or CSV/TSV (gzip allowed) laid out as the run's data"},
    [OPT_OUT] = {"out", 'o', "FILE", "FILE.h5ad or FILE.csv; - = CSV on stdout"},
    [OPT_TASK] = {"task", 't', "TASK", "expr_to_pos (place cells) or pos_to_expr (expression at positions); "
                                       "default: the run's training_mode, joint -> expr_to_pos"},
    [OPT_STEPS] = {"steps", 'n', "N", "network evaluations (default: the config's sampling.num_steps)"},
    [OPT_ALLOW_MISSING] = {"allow-missing-genes", 0, NULL, "zero-fill the run's genes the data lacks (listed, warned)"},
    [OPT_SLICE_KEY] = {"slice-key", 0, "KEY", "obs column naming each cell's section (default: the run's "
                                              "data.slice_key); none = one section"},
    [OPT_POSITION_KEY] = {"position-key", 0, "KEY", "pos_to_expr: obsm key of the positions (default: the run's "
                                                    "data.preprocessing.position_key)"},
    [OPT_DEVICE] = CLI_DEVICE_OPTION,
};

static const cli_spec spec = {
    .name = "predict",
    .usage = "RUN_DIR --data FILE --out FILE.h5ad|FILE.csv|- [--task expr_to_pos|pos_to_expr] [--steps N]\n"
             "       [--allow-missing-genes] [--slice-key KEY|none] [--position-key KEY] [--device NAME]\n"
             "       [KEY=VALUE ...]",
    .about = "Places every cell of a new dataset from its expression with a trained run\n"
             "(an expr_to_pos or joint one), as its expr_to_pos task.\n"
             "Genes are matched by name to the run's: genes the run does not know are\n"
             "dropped (counted); genes of the run the data lacks are an error naming them,\n"
             "or zeros with --allow-missing-genes. The data is preprocessed as the run's\n"
             "(data.preprocessing.*: log-normalised, z-scored per section); coordinates\n"
             "are not needed to place cells. Each section is split into sets by\n"
             "expression alone, as the evaluation does (evaluation.max_set_size); when it\n"
             "takes more than one set, a quarter of each set are landmark cells drawn at\n"
             "random and shared by all its sets, and each set is aligned onto the ones\n"
             "before it on the cells they share (Kabsch, reflection allowed), each cell at\n"
             "the mean of its placements: one frame per section, in the run's data units,\n"
             "centred, defined up to rotation and reflection; 2-D runs give x and y, the\n"
             "section turned onto its principal axes. Sets and noise come from\n"
             "evaluation.seed, as in sample and eval. KEY=VALUE overrides sampling.* and\n"
             "evaluation.* keys (evaluation.max_set_size=512). See docs/predict.md.\n"
             ".h5ad: the cells in the data's order with its obs_names and obs columns (then\n"
             "cell, the row, and set, the first set holding it), X = the data's values of\n"
             "the run's genes as read, var = the run's genes, obsm/alphast_spatial = the\n"
             "placement, uns/alphast = config, checkpoint, version, command, length_unit\n"
             "(the run's, in data units), genes_missing, genes_dropped, sets, landmarks.\n"
             "CSV: cell (the obs name, else the row), x, y[, z].\n"
             "--task pos_to_expr (a pos_to_expr or joint run) generates the expression of\n"
             "the run's genes at the data's positions instead (obsm/<position key> of an\n"
             ".h5ad, x, y[, z] of a CSV; expression not needed, and not read), on the scale\n"
             "the model learned: log-normalised and, with data.preprocessing.scale, z-scored\n"
             "per gene and section. Sets: each section split by balanced k-means on position\n"
             "into sets of at most evaluation.max_set_size, each centred and in the run's\n"
             "length unit. .h5ad: X = the expression, var = the run's genes, obsm/spatial\n"
             "= the positions as given, uns/alphast also task, expression. CSV: cell, x,\n"
             "y[, z] as given, then a column per gene.\n"
             "--device cuda places on a GPU (docs/gpu.md).",
    .options = options,
    .n_options = N_OPTS,
    .max_args = 64,
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* How many of names[0..n) are not in list[0..m); pushed to `out` unless NULL. */
static int absent(char *const *names, int n, char *const *list, int m, ast_strlist *out)
{
    char **sorted = ast_xmalloc((size_t)(m ? m : 1) * sizeof *sorted);
    memcpy(sorted, list, (size_t)m * sizeof *sorted);
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_str);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (bsearch(&names[i], sorted, (size_t)m, sizeof *sorted, cmp_str)) continue;
        k++;
        if (out) ast_strlist_push(out, names[i]);
    }
    free(sorted);
    return k;
}

/* What predict read: the data on the run's genes, and the counts of the
 * gene match. */
typedef struct input {
    ast_dataset d;
    float *x;          /* [n_cells, G] the data's values of the run's genes, as read */
    ast_strlist missing; /* the run's genes the data lacks */
    int dropped;       /* the data's genes the run lacks */
} input;

static void input_free(input *in)
{
    ast_dataset_free(&in->d);
    free(in->x);
    ast_strlist_free(&in->missing);
}

/* How to read the data: as the run's, with --slice-key. */
static void data_opts(const cli_run *r, const char **v, ast_data_opts *o)
{
    ast_data_opts_from_cfg(r->cfg, o);
    o->coords_file = NULL;
    if (v[OPT_SLICE_KEY]) o->slice_key = strcmp(v[OPT_SLICE_KEY], "none") ? v[OPT_SLICE_KEY] : NULL;
}

/* Reads the data, matches its genes to the run's and preprocesses it as
 * the run's; v[OPT_ALLOW_MISSING] decides about missing genes. */
static int read_input(const cli_run *r, const char **v, input *in, ast_error *e)
{
    ast_data_opts o;
    data_opts(r, v, &o);
    o.positions_optional = 1;
    memset(in, 0, sizeof *in);
    if (ast_data_read(v[OPT_DATA], &o, &in->d, e) < 0) return -1;
    const ast_dataset *run = &r->d;
    in->dropped = absent(in->d.genes, in->d.n_genes, run->genes, run->n_genes, NULL);
    if (absent(run->genes, run->n_genes, in->d.genes, in->d.n_genes, &in->missing)) {
        char list[1024];
        ast_strlist_join(&in->missing, ", ", "", list, sizeof list);
        if (!v[OPT_ALLOW_MISSING]) {
            ast_error_set(e, "%s: %d of the run's %d genes are missing (%s); add them, or pass --allow-missing-genes "
                          "to predict with them as zeros", v[OPT_DATA], in->missing.n, run->n_genes, list);
            return -1;
        }
        ast_log(AST_LOG_WARN, "%s: %d of the run's %d genes are missing and taken as zeros (%s)", v[OPT_DATA],
                in->missing.n, run->n_genes, list);
    }
    /* First only aligned, to keep the values as read; then as the run's. */
    if (!(in->x = cli_rows_as_read(&in->d, run->genes, run->n_genes, NULL, in->d.n_cells, e))) return -1;
    return ast_data_preprocess(&in->d, &o, e);
}

/* What predict writes: the placement of every cell of the data, [n_cells,
 * 3], in data units; or for pos_to_expr the positions as given and the
 * expression generated there. */
typedef struct placement {
    ast_eval_sets sets;
    float *pos;
    float *expr; /* pos_to_expr: [n_cells, G]; else NULL */
    float unit;  /* the run's length unit */
    int landmarks;
} placement;

/* Every cell of d, as one split. */
static ast_split all_cells(const ast_dataset *d)
{
    ast_split all = {ast_xmalloc((size_t)(d->n_cells ? d->n_cells : 1) * sizeof *all.cells), d->n_cells};
    for (int64_t c = 0; c < d->n_cells; c++) all.cells[c] = c;
    return all;
}

/* Each section centred (the stitched frame is its first set's, whose
 * centre is not the section's) and, flat (a 2-D run), turned onto its
 * principal axes as sample turns its sets: x-y is the plane it lies in. */
static void orient_sections(const ast_dataset *d, float *pos, int flat)
{
    float *part = ast_xmalloc((size_t)d->n_cells * 3 * sizeof *part);
    for (int v = 0; v < d->n_slices; v++) {
        int n = 0;
        double mean[3] = {0};
        for (int64_t c = 0; c < d->n_cells; c++)
            if (d->slice[c] == v) memcpy(part + 3 * n++, pos + c * 3, 3 * sizeof *part);
        for (int i = 0; i < 3 * n; i++) mean[i % 3] += part[i] / (double)n;
        for (int i = 0; i < 3 * n; i++) part[i] -= (float)mean[i % 3];
        if (flat) ast_positions_to_principal_axes(n, part, NULL);
        n = 0;
        for (int64_t c = 0; c < d->n_cells; c++)
            if (d->slice[c] == v) memcpy(pos + c * 3, part + 3 * n++, 3 * sizeof *part);
    }
    free(part);
}

static void place(cli_run *r, const ast_schedule *s, const ast_sampler_config *sc, const ast_dataset *d, placement *p)
{
    ast_split all = all_cells(d);
    int max_set_size = (int)ast_cfg_int(r->cfg, "evaluation.max_set_size");
    p->unit = cli_eval_sets(r->cfg, &r->d, r->sp, AST_SPLIT_TEST).pos_scale;
    p->landmarks = max_set_size / 4;
    ast_set_sampler cells = {d, &all, max_set_size, p->unit, 0, 0.0f};
    ast_eval_sets_landmarks(&cells, max_set_size, p->landmarks, sc->seed, &p->sets);
    const ast_eval_sets *e = &p->sets;
    float *gen = ast_xmalloc((size_t)e->B * e->N * 3 * sizeof *gen);
    ast_sample(r->m, s, sc, e->B, e->N, e->expr, e->pos, e->mask, NULL, gen);
    p->pos = ast_xmalloc((size_t)d->n_cells * 3 * sizeof *p->pos);
    if (ast_stitch_sets(e, gen, d->n_cells, p->pos))
        ast_log(AST_LOG_WARN, "%s: some sets shared fewer than 3 cells with the others and are not aligned; raise "
                "evaluation.max_set_size (its quarter are the shared landmarks)", d->source);
    orient_sections(d, p->pos, r->d.coord_dims == 2);
    for (int64_t i = 0; i < d->n_cells * 3; i++) p->pos[i] *= p->unit;
    free(gen), free(all.cells);
}

/* ---- pos_to_expr -------------------------------------------------------------- */

/* In place of the data's genes, if any, the run's, none expressed: the
 * model generates them and never reads them. */
static void run_genes_unexpressed(ast_dataset *d, const ast_dataset *run)
{
    for (int g = 0; g < d->n_genes; g++) free(d->genes[g]);
    for (int j = 0; j < d->n_var; j++) ast_obs_column_free(&d->var[j]);
    free(d->genes), free(d->var), ast_csr_free(&d->x);
    d->x = (ast_csr){ast_xcalloc((size_t)d->n_cells + 1, sizeof(int64_t)), ast_xcalloc(1, sizeof(int32_t)),
                     ast_xcalloc(1, sizeof(float))};
    d->genes = ast_xmalloc((size_t)run->n_genes * sizeof *d->genes), d->n_genes = run->n_genes;
    for (int g = 0; g < run->n_genes; g++) d->genes[g] = ast_xstrdup(run->genes[g]);
    d->var = NULL, d->n_var = 0;
}

/* The data's positions, kept as given for the output (p->pos), on in->d
 * with the run's genes: the sets centre them, as sample's. */
static int read_positions(const cli_run *r, const char **v, input *in, placement *p, ast_error *e)
{
    ast_data_opts o;
    data_opts(r, v, &o);
    /* X, if any, as it is: no layer or raw/X to insist on, negative values allowed */
    o.expression_optional = 1, o.genes_by_cells = 0, o.log_normalize = 0, o.layer = NULL, o.use_raw = 0;
    if (v[OPT_POSITION_KEY]) o.position_key = v[OPT_POSITION_KEY];
    memset(in, 0, sizeof *in);
    if (ast_data_read(v[OPT_DATA], &o, &in->d, e) < 0) return -1;
    if (in->d.coord_dims != r->d.coord_dims) {
        ast_error_set(e, "%s: %d-D positions, but the run was trained on %d-D ones; give x, y%s", v[OPT_DATA],
                      in->d.coord_dims, r->d.coord_dims, r->d.coord_dims == 3 ? " and z" : " alone");
        return -1;
    }
    p->pos = ast_xmalloc((size_t)in->d.n_cells * 3 * sizeof *p->pos);
    memcpy(p->pos, in->d.pos, (size_t)in->d.n_cells * 3 * sizeof *p->pos);
    run_genes_unexpressed(&in->d, &r->d);
    return 0;
}

/* The expression of each cell of d, generated in its set (each cell is in
 * one): the sets are patches of each section, centred and in the run's
 * length unit, as sample gives its sets to the model. */
static void generate(cli_run *r, const ast_schedule *s, const ast_sampler_config *sc, const ast_dataset *d, placement *p)
{
    ast_split all = all_cells(d);
    int max_set_size = (int)ast_cfg_int(r->cfg, "evaluation.max_set_size"), G = d->n_genes;
    p->unit = cli_eval_sets(r->cfg, &r->d, r->sp, AST_SPLIT_TEST).pos_scale;
    p->landmarks = 0;
    ast_set_sampler cells = {d, &all, max_set_size, p->unit, 0, 0.0f};
    ast_eval_sets_by_position(&cells, max_set_size, sc->seed, &p->sets);
    const ast_eval_sets *e = &p->sets;
    size_t rows = (size_t)e->B * e->N;
    float *gen = ast_xmalloc(rows * G * sizeof *gen), *pos = ast_xmalloc(rows * 3 * sizeof *pos);
    ast_sample(r->m, s, sc, e->B, e->N, e->expr, e->pos, e->mask, gen, pos);
    p->expr = ast_xmalloc((size_t)d->n_cells * G * sizeof *p->expr);
    for (size_t i = 0; i < rows; i++)
        if (e->cells[i] >= 0) memcpy(p->expr + e->cells[i] * G, gen + i * G, (size_t)G * sizeof *gen);
    free(gen), free(pos), free(all.cells);
}

static void placement_free(placement *p)
{
    ast_eval_sets_free(&p->sets);
    free(p->pos), free(p->expr);
}

/* ---- output --------------------------------------------------------------- */

typedef struct csv_job {
    const ast_dataset *d;
    const placement *p;
    int dims;
} csv_job;

/* cell,x,y[,z] and, for pos_to_expr, a column per gene. */
static int fill_csv(FILE *f, void *ud)
{
    const csv_job *c = ud;
    const ast_dataset *d = c->d;
    int G = c->p->expr ? d->n_genes : 0;
    fprintf(f, c->dims == 2 ? "cell,x,y" : "cell,x,y,z");
    for (int g = 0; g < G; g++) fputc(',', f), ast_csv_field(f, d->genes[g]);
    fputc('\n', f);
    for (int64_t r = 0; r < d->n_cells; r++) {
        if (d->cell_names) fprintf(f, "%s", d->cell_names[r]);
        else fprintf(f, "%lld", (long long)r);
        for (int k = 0; k < c->dims; k++) fprintf(f, ",%.7g", c->p->pos[r * 3 + k]);
        for (int g = 0; g < G; g++) fprintf(f, ",%.7g", c->p->expr[r * G + g]);
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

/* The first set holding each cell. */
static int64_t *first_sets(const ast_eval_sets *e, int64_t n_cells)
{
    int64_t *set = ast_xmalloc((size_t)n_cells * sizeof *set);
    for (int64_t c = 0; c < n_cells; c++) set[c] = -1;
    for (int64_t i = (int64_t)e->B * e->N - 1; i >= 0; i--)
        if (e->cells[i] >= 0) set[e->cells[i]] = i / e->N;
    return set;
}

/* The scale of generated expression, in words: the run's preprocessing,
 * which the model learned to produce. */
static void expression_scale(const ast_cfg *cfg, char *buf, size_t n)
{
    int logged = ast_cfg_bool(cfg, "data.preprocessing.log_normalize"), scaled = ast_cfg_bool(cfg, "data.preprocessing.scale");
    snprintf(buf, n, "%s%s", logged ? "log1p(counts per 10,000 of the cell)" : "the data's values",
             scaled ? ", z-scored per gene and section of the training data (clipped at data.preprocessing.clip)" : "");
}

static int write_h5ad(const char *path, cli_run *r, const input *in, const placement *p, int argc, char **argv,
                      ast_error *e)
{
    char *config = ast_cfg_dump_string(r->cfg, e), weights[PATH_MAX], unit[32], dropped[16], sets[16], landmarks[16];
    char scale[160];
    if (!config) return -1;
    size_t room = 1;
    for (int i = 0; i < in->missing.n; i++) room += strlen(in->missing.v[i]) + 1;
    char *command = sample_command_line(argc, argv), *missing = ast_xmalloc(room); /* all of them, unlike the message */
    ast_strlist_join(&in->missing, ",", "", missing, room);
    snprintf(unit, sizeof unit, "%.9g", p->unit), snprintf(dropped, sizeof dropped, "%d", in->dropped);
    snprintf(sets, sizeof sets, "%d", p->sets.B), snprintf(landmarks, sizeof landmarks, "%d", p->landmarks);
    expression_scale(r->cfg, scale, sizeof scale);
    const char *provenance[] = {"config", config, "checkpoint", realpath(r->weights, weights) ? weights : r->weights,
                                "version", PACKAGE_VERSION, "command", command, "length_unit", unit,
                                "genes_missing", missing, "genes_dropped", dropped, "sets", sets,
                                "landmarks", landmarks, "task", p->expr ? "pos_to_expr" : "expr_to_pos",
                                p->expr ? "expression" : NULL, scale, NULL};
    int64_t *row = ast_xmalloc((size_t)in->d.n_cells * sizeof *row), *set = first_sets(&p->sets, in->d.n_cells);
    for (int64_t c = 0; c < in->d.n_cells; c++) row[c] = c;
    sample_cells g = {.n = in->d.n_cells, .G = in->d.n_genes, .sets = p->sets.B, .cell = row, .set = set,
                      .expr = p->expr ? p->expr : in->x, .pos = p->pos,
                      .pos_key = p->expr ? NULL : "alphast_spatial"};
    int rc = sample_write_h5ad(path, &g, &in->d, provenance, e);
    free(config), free(command), free(missing), free(row), free(set);
    return rc;
}

/* ---- the command ------------------------------------------------------------ */

/* The task: --task, else the run's, a joint run's being to place. */
static int task_of(const ast_train_config *tc, const char *task, const char *dir, ast_train_mode *out, ast_error *e)
{
    *out = tc->mode == AST_MODE_POS_TO_EXPR ? AST_MODE_POS_TO_EXPR : AST_MODE_EXPR_TO_POS;
    if (task) ast_mode_parse(task, out); /* valid: checked by cmd_predict */
    if (tc->mode == AST_MODE_JOINT || tc->mode == *out) return 0;
    ast_error_set(e, "%s: the run was trained for %s and cannot %s; use a run trained for %s or joint", dir,
                  ast_mode_name(tc->mode), *out == AST_MODE_POS_TO_EXPR ? "generate expression" : "place cells",
                  ast_mode_name(*out));
    return -1;
}

static int predict(cli_run *r, const char **v, const char *dir, int argc, char **argv, ast_error *e)
{
    ast_train_config tc;
    ast_sampler_config sc;
    if (cli_sampler_config(r->cfg, NULL, v[OPT_STEPS], &tc, &sc, e) < 0 || task_of(&tc, v[OPT_TASK], dir, &sc.mode, e) < 0)
        return -1;
    int to_expr = sc.mode == AST_MODE_POS_TO_EXPR;
    input in;
    placement p = {0};
    ast_schedule s;
    if ((to_expr ? read_positions(r, v, &in, &p, e) : read_input(r, v, &in, e)) < 0 ||
        ast_schedule_init(&s, tc.diffusion_steps, tc.nu_expression, tc.nu_position, e) < 0) {
        input_free(&in);
        placement_free(&p);
        return -1;
    }
    in.d.coord_dims = r->d.coord_dims; /* placed in the run's dimensions */
    if (to_expr) generate(r, &s, &sc, &in.d, &p);
    else place(r, &s, &sc, &in.d, &p);
    ast_schedule_free(&s);
    const char *out = v[OPT_OUT];
    csv_job job = {&in.d, &p, r->d.coord_dims};
    int rc = ends_with(out, ".h5ad") ? write_h5ad(out, r, &in, &p, argc, argv, e)
                                     : ast_atomic_write(out, fill_csv, &job, e);
    if (rc == 0 && to_expr) /* stdout may be the CSV's */
        fprintf(strcmp(out, "-") ? stdout : stderr, "%s: the expression of %d genes at %lld positions generated by %s "
                "(%d sets), written to %s\n", v[OPT_DATA], in.d.n_genes, (long long)in.d.n_cells, dir, p.sets.B,
                strcmp(out, "-") ? out : "stdout");
    else if (rc == 0)
        fprintf(strcmp(out, "-") ? stdout : stderr, "%s: %lld cells placed by %s (%d sets, %d genes dropped, %d "
                "missing), written to %s\n", v[OPT_DATA], (long long)in.d.n_cells, dir, p.sets.B, in.dropped,
                in.missing.n, strcmp(out, "-") ? out : "stdout");
    placement_free(&p);
    input_free(&in);
    return rc;
}

int cmd_predict(int argc, char **argv)
{
    const char *v[N_OPTS], *args[64];
    int n_args;
    int rc = cli_parse(&spec, argc, argv, v, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    if (n_args < 1) return cli_usage_error("predict", "missing RUN_DIR");
    if (!v[OPT_DATA]) return cli_usage_error("predict", "--data FILE (.h5ad or CSV) is required");
    ast_train_mode task;
    if (v[OPT_TASK] && (ast_mode_parse(v[OPT_TASK], &task) < 0 || task == AST_MODE_JOINT))
        return cli_usage_error("predict", "--task must be expr_to_pos or pos_to_expr (got '%s')", v[OPT_TASK]);
    if (!v[OPT_OUT] || !(!strcmp(v[OPT_OUT], "-") || ends_with(v[OPT_OUT], ".csv") || ends_with(v[OPT_OUT], ".h5ad")))
        return cli_usage_error("predict", "--out FILE.h5ad, --out FILE.csv or --out - (CSV on stdout) is required");
    ast_error e = {""};
    cli_run r;
    rc = cli_run_open(&r, args[0], args + 1, n_args - 1, v[OPT_DEVICE], &e);
    if (rc == 0) rc = predict(&r, v, args[0], argc, argv, &e);
    cli_run_close(&r);
    return rc < 0 ? cli_fail(&e) : CLI_OK;
}
