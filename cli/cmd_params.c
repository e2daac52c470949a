/* `alphast-run params CONFIG.yaml [--genes G] [KEY=VALUE ...]`: total and
 * active parameter counts of the model a config describes, per module group. */
#include <stdlib.h>

#include "config/config.h"
#include "model/model.h"
#include "cli.h"
#include "commands.h"
#include "run_setup.h"

enum { OPT_GENES, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_GENES] = {"genes", 'g', "G", "number of genes G, which data sets fix (default 100, as compare_configs.py)"},
};

static const cli_spec spec = {
    .name = "params",
    .usage = "CONFIG.yaml [--genes G] [KEY=VALUE | +KEY=VALUE | ++KEY=VALUE | ~KEY ...]",
    .about = "Builds the model CONFIG.yaml describes and prints its parameter count, total and\n"
             "active per token (MoE: the router and top-k experts), for each module group.\n"
             "Overrides change the config first, as for train (docs/config.md).",
    .options = options,
    .n_options = N_OPTS,
    .max_args = 1 + CLI_MAX_OVERRIDES,
};

/* 1234567 -> "1,234,567" */
static const char *grouped(int64_t v, char *buf, size_t n)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", (long long)v), o = 0;
    for (int i = 0; i < len && (size_t)o + 2 < n; i++) {
        if (i && digits[i - 1] != '-' && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

static void print_row(const char *name, const char *plugin, int64_t total, int64_t active)
{
    char label[96], a[32], b[32];
    snprintf(label, sizeof label, plugin ? "%s (%s)" : "%s", name, plugin);
    printf("  %-36s %14s %14s\n", label, grouped(total, a, sizeof a), grouped(active, b, sizeof b));
}

static void print_counts(const char *path, const ast_model *m)
{
    const ast_model_config *c = ast_model_cfg(m);
    ast_param_group g[AST_N_PARAM_GROUPS];
    ast_model_param_groups(m, g);
    printf("%s: attention %s, ffn %s, %d layers, d_model %d, %d genes\n\n", path, c->attention, c->ffn,
           c->num_layers, c->d_model, c->num_genes);
    printf("  %-36s %14s %14s\n", "group", "parameters", "active");
    for (int i = 0; i < AST_N_PARAM_GROUPS; i++)
        print_row(g[i].name, i == 2 ? c->attention : i == 3 ? c->ffn : NULL, g[i].total, g[i].active);
    int64_t total = ast_model_param_count(m), active = ast_model_active_param_count(m);
    print_row("total", NULL, total, active);
    printf("\nactive share: %.1f%%\n", 100.0 * (double)active / (double)total);
}

static int parse_genes(const char *text, int *out)
{
    char *end;
    long v = text ? strtol(text, &end, 10) : 100;
    if (text && (*end || end == text || v <= 0 || v > 10000000))
        return cli_usage_error(spec.name, "--genes must be a positive integer, not '%s'", text);
    *out = (int)v;
    return CLI_CONTINUE;
}

int cmd_params(int argc, char **argv)
{
    const char *value[N_OPTS], *args[1 + CLI_MAX_OVERRIDES];
    int n_args, genes = 0;
    int rc = cli_parse(&spec, argc, argv, value, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    if (n_args < 1) return cli_usage_error(spec.name, "give the config file (CONFIG.yaml)");
    if ((rc = parse_genes(value[OPT_GENES], &genes)) != CLI_CONTINUE) return rc;

    ast_error e = {""};
    ast_model_config mc;
    ast_cfg *cfg = cli_load_config(args[0], args + 1, n_args - 1, &e);
    ast_model *m = cfg && !ast_cfg_model(cfg, genes, &mc, &e) ? ast_model_new(&mc, 0, &e) : NULL;
    int ok = m != NULL;
    if (ok) print_counts(args[0], m);
    ast_model_free(m);
    ast_cfg_free(cfg);
    return ok ? CLI_OK : cli_fail(&e);
}
