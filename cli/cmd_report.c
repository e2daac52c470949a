/* `alphast-run report SWEEP_DIR [--out DIR|-] [--baseline NAME]`: the
 * ablation report of a sweep, as Markdown and as one HTML page. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/report.h"
#include "cli.h"
#include "commands.h"

enum { OPT_OUT, OPT_BASELINE, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_OUT] = {"out", 'o', "DIR", "write the report here (default: SWEEP_DIR); - = report.html to stdout"},
    [OPT_BASELINE] = {"baseline", 'b', "NAME", "reference config the others are compared with (default: Baseline, else the first)"},
};

static const cli_spec spec = {
    .name = "report",
    .usage = "SWEEP_DIR [--out DIR|-] [--baseline NAME]",
    .about = "Reads a sweep directory (ledger.jsonl and its run directories) and writes report.md\n"
             "(with report_*.svg plots next to it, each with its numbers as report_*.csv) and\n"
             "report.html (self-contained, works offline): the verdict in one line on top, placed vs\n"
             "true cells per config, cost per config, loss curves per seed with each seed's best\n"
             "epoch, validation loss and sampling metrics as mean ± sd over seeds beside every\n"
             "baseline, differences from the reference config with bootstrap intervals, Welch and\n"
             "Holm-corrected p-values and the smallest detectable difference, monitor summaries, a\n"
             "verdict that claims only what survives correction and sets the best config against the\n"
             "best baseline, the runs that failed or did not finish, and each run's config and\n"
             "provenance.",
    .options = options,
    .n_options = N_OPTS,
    .max_args = 1,
};

static int copy_to_stdout(const char *path, ast_error *e)
{
    FILE *in = fopen(path, "rb");
    char buf[65536];
    size_t n;
    int ok = in != NULL;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, stdout) == n;
    ok = ok && !ferror(in) && fflush(stdout) == 0;
    if (!ok) ast_error_set(e, "%s: cannot copy to standard output: %s", path, strerror(errno));
    if (in) fclose(in);
    return ok ? 0 : -1;
}

/* --out -: the report is made in a temporary directory and its one
 * self-contained file, report.html (plots inline), goes to stdout; the
 * Markdown's plots would be files that no longer exist. */
static int report_to_stdout(const char *sweep_dir, const char *baseline, ast_error *e)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096], html[4200];
    snprintf(dir, sizeof dir, "%s/alphast-report-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        ast_error_set(e, "%s: cannot create a temporary directory: %s; set TMPDIR to a writable one", dir,
                      strerror(errno));
        return -1;
    }
    ast_report_opts o = {dir, baseline};
    snprintf(html, sizeof html, "%s/report.html", dir);
    int rc = ast_report_write(sweep_dir, &o, e) < 0 ? -1 : copy_to_stdout(html, e);
    ast_remove_flat_dir(dir); /* and the files the report wrote into it */
    return rc;
}

int cmd_report(int argc, char **argv)
{
    const char *value[N_OPTS], *args[1];
    int n_args;
    int rc = cli_parse(&spec, argc, argv, value, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    if (n_args != 1) return cli_usage_error(spec.name, "give the sweep directory (SWEEP_DIR)");
    ast_error e = {""};
    if (value[OPT_OUT] && !strcmp(value[OPT_OUT], "-"))
        return report_to_stdout(args[0], value[OPT_BASELINE], &e) < 0 ? cli_fail(&e) : CLI_OK;
    ast_report_opts o = {value[OPT_OUT], value[OPT_BASELINE]};
    if (ast_report_write(args[0], &o, &e) < 0) return cli_fail(&e);
    const char *dir = o.out_dir ? o.out_dir : args[0];
    printf("wrote %s/report.md and %s/report.html\n", dir, dir);
    return CLI_OK;
}
