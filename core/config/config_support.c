/* Keys of the reference's config.yaml that alphast accepts but does not
 * implement. Loading takes any valid value, so the reference file loads;
 * a run refuses one that asks for what alphast does not do, where it
 * used to ignore it in silence (docs/config.md). */
#include <string.h>

#include "config_impl.h"

typedef struct unsupported {
    const char *path; /* a key, or every key below a prefix that ends in '.' */
    const char *also; /* values accepted besides the default ("a|b"), or NULL */
    const char *fix;
} unsupported;

static const unsupported table[] = {
    {"training.precision", "32|bf16-mixed|tf32",
     "alphast computes in float32, or with bf16 GEMMs (bf16-mixed) or a GPU's TF32 GEMMs (tf32); it has no float16 "
     "mode: write training.precision: 32-true, bf16-mixed, tf32 or leave it out"},
    {"distributed.", NULL,
     "alphast does not read Lightning's distributed settings: one run over several processes is mpirun -np R "
     "alphast-run train (built --with-mpi, docs/cluster.md); leave distributed.* at its defaults or out"},
    {"logging.logger", "none",
     "alphast logs to TensorBoard, not to Weights & Biases: write logging.logger: tensorboard (the default) or none"},
    {"logging.", NULL,
     "alphast logs every step to the run's metrics.jsonl and keeps checkpoint.safetensors and "
     "best.safetensors in the run directory (--out); leave logging.* at its defaults or out"},
};

static const unsupported *rule_of(const char *path)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        size_t n = strlen(table[i].path);
        int prefix = table[i].path[n - 1] == '.';
        if (prefix ? !strncmp(path, table[i].path, n) : !strcmp(path, table[i].path)) return &table[i];
    }
    return NULL;
}

/* Is the scalar n one of the '|'-separated values? */
static int accepted(const ast_cfg_node *n, const char *values)
{
    if (n->kind != AST_CFG_SCALAR) return 0;
    size_t len = strlen(n->value);
    for (const char *p = values; p; p = strchr(p, '|'), p = p ? p + 1 : NULL)
        if (!strncmp(p, n->value, len) && (p[len] == '|' || p[len] == 0)) return 1;
    return 0;
}

/* The written nodes in file order: the first that asks for what is not supported. */
static int check(const ast_cfg_node *n, ast_error *e)
{
    const cfg_key *k = cfg_schema_find(n->path);
    const unsupported *r = k && k->type != CFG_MAP ? rule_of(n->path) : NULL;
    int also = r && r->also && accepted(n, r->also);
    if (r && !also && !cfg_is_default(n, k)) {
        char got[256];
        ast_cfg_fail(e, n->file, n->line, n->col, n->path, "%s is not supported: %s",
                     cfg_describe(n, got, sizeof got), r->fix);
        return -1;
    }
    for (int i = 0; n->kind == AST_CFG_MAP && i < n->n_items; i++)
        if (check(n->items[i], e) < 0) return -1;
    return 0;
}

int ast_cfg_check_supported(const ast_cfg *cfg, ast_error *e) { return check(cfg->root, e); }
