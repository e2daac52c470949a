/* parity_setup: the alphast side of `make parity`. Builds the model a
 * config describes with alphast's own initialisation and writes its weights
 * (PyTorch state_dict names) and a batch of random inputs with padding, for
 * `alphast-run forward` and the PyTorch twin to run on.
 *
 *   parity_setup CONFIG.yaml GENES SEED PREFIX
 *   -> PREFIX.weights.safetensors, PREFIX.inputs.safetensors */
#include <math.h>
#include <stdlib.h>

#include "config/config.h"
#include "model/model.h"
#include "io/safetensors.h"

enum { SETS = 3, CELLS = 40 };
/* Valid cells per set: full, padded, and a set of one cell (centring of one). */
static const int valid_cells[SETS] = {CELLS, 27, 1};

typedef struct parity_inputs {
    float expression[SETS * CELLS * 1024];
    float positions[SETS * CELLS * 3];
    float t[SETS];
    float mask[SETS * CELLS];
} parity_inputs;

/* As the demo data (docs/model.md §10.1): log1p(10 U) expression, 10 N(0,1)
 * positions; padded cells are all zero. */
static void fill_inputs(parity_inputs *in, int genes, uint64_t seed)
{
    ast_rng r;
    ast_rng_seed(&r, seed);
    for (int b = 0; b < SETS; b++) {
        in->t[b] = (1.0f + (float)(ast_rng_next(&r) % 100)) / 100.0f;
        for (int n = 0; n < CELLS; n++) {
            int cell = b * CELLS + n, valid = n < valid_cells[b];
            in->mask[cell] = (float)valid;
            for (int g = 0; g < genes; g++)
                in->expression[cell * genes + g] = valid ? log1pf(10.0f * ast_rng_uniform01(&r)) : 0.0f;
            for (int d = 0; d < 3; d++) in->positions[cell * 3 + d] = valid ? 10.0f * ast_rng_gauss(&r) : 0.0f;
        }
    }
}

static int write_inputs(const parity_inputs *in, int genes, const char *path, ast_error *e)
{
    ast_st_writer *w = ast_st_writer_new();
    ast_st_writer_add(w, "expression", AST_ST_F32, 3, (int64_t[]){SETS, CELLS, genes}, in->expression);
    ast_st_writer_add(w, "positions", AST_ST_F32, 3, (int64_t[]){SETS, CELLS, 3}, in->positions);
    ast_st_writer_add(w, "t", AST_ST_F32, 2, (int64_t[]){SETS, 1}, in->t);
    ast_st_writer_add(w, "node_mask", AST_ST_F32, 2, (int64_t[]){SETS, CELLS}, in->mask);
    int rc = ast_st_writer_write(w, path, e);
    ast_st_writer_free(w);
    return rc;
}

static int run(const char *config, int genes, uint64_t seed, const char *prefix, ast_error *e)
{
    char path[4096];
    ast_model_config mc;
    ast_model *m = NULL;
    ast_cfg *cfg = ast_cfg_load_file(config, e);
    int ok = cfg && !ast_cfg_model(cfg, genes, &mc, e) && (m = ast_model_new(&mc, seed, e));
    if (ok) {
        snprintf(path, sizeof path, "%s.weights.safetensors", prefix);
        ok = !ast_params_save(ast_model_params(m), path, NULL, e);
    }
    if (ok) {
        parity_inputs *in = ast_xcalloc(1, sizeof *in);
        fill_inputs(in, genes, seed + 1);
        snprintf(path, sizeof path, "%s.inputs.safetensors", prefix);
        ok = !write_inputs(in, genes, path, e);
        free(in);
    }
    ast_model_free(m);
    ast_cfg_free(cfg);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    int genes = argc == 5 ? atoi(argv[2]) : 0;
    if (genes < 1 || genes > 1024) {
        fprintf(stderr, "usage: parity_setup CONFIG.yaml GENES(1..1024) SEED PREFIX\n");
        return 2;
    }
    ast_error e = {""};
    if (run(argv[1], genes, strtoull(argv[3], NULL, 10), argv[4], &e)) {
        fprintf(stderr, "parity_setup: %s\n", e.msg);
        return 1;
    }
    return 0;
}
