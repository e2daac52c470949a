/* `alphast-run report SWEEP_DIR [--out DIR] [--baseline NAME]`: the
 * ablation report of a sweep, as Markdown and as one HTML page. */
#include "report/report.h"
#include "cli.h"
#include "commands.h"

enum { OPT_OUT, OPT_BASELINE, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_OUT] = {"out", 'o', "DIR", "write the report here (default: SWEEP_DIR)"},
    [OPT_BASELINE] = {"baseline", 'b', "NAME", "reference config the others are compared with (default: Baseline, else the first)"},
};

static const cli_spec spec = {
    .name = "report",
    .usage = "SWEEP_DIR [--out DIR] [--baseline NAME]",
    .about = "Reads a sweep directory (ledger.jsonl and its run directories) and writes report.md\n"
             "(with report_*.svg plots next to it) and report.html (self-contained, works offline):\n"
             "cost per config, loss curves, validation loss and sampling metrics as mean ± sd over\n"
             "seeds beside every baseline, differences from the reference config with bootstrap\n"
             "intervals, Welch and Holm-corrected p-values and the smallest detectable difference,\n"
             "monitor summaries, a verdict that claims only what survives correction and sets the\n"
             "best config against the best baseline, and the runs that failed or did not finish.",
    .options = options,
    .n_options = N_OPTS,
    .max_args = 1,
};

int cmd_report(int argc, char **argv)
{
    const char *value[N_OPTS], *args[1];
    int n_args;
    int rc = cli_parse(&spec, argc, argv, value, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    if (n_args != 1) return cli_usage_error(spec.name, "give the sweep directory (SWEEP_DIR)");
    ast_error e = {""};
    ast_report_opts o = {value[OPT_OUT], value[OPT_BASELINE]};
    if (ast_report_write(args[0], &o, &e) < 0) return cli_fail(&e);
    const char *dir = o.out_dir ? o.out_dir : args[0];
    printf("wrote %s/report.md and %s/report.html\n", dir, dir);
    return CLI_OK;
}
