/* `alphast-run sweep --status DIR`: every run of a sweep directory as its
 * ledger and claims tell it, wherever its runners are (this machine, or the
 * nodes of a Slurm job array sharing the file system). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sweep/ledger.h"
#include "base/progress.h"
#include "cli.h"
#include "sweep_status.h"

#define MAX_PENDING_SHOWN 20

/* A running run: where its claim says it runs, the pid of its training
 * process (the ledger's; the claim's is its runner's), its GPU, since when. */
static void print_claim(const char *dir, const ast_ledger_run *r)
{
    ast_claim_info c;
    char took[16], job[80] = "";
    ast_claim_inspect(dir, r->run, &c);
    int pid = r->pid ? r->pid : c.pid;
    ast_fmt_duration(c.age, took, sizeof took);
    if (c.job[0]) snprintf(job, sizeof job, ", Slurm job %s", c.job);
    if (r->gpu) snprintf(job + strlen(job), sizeof job - strlen(job), ", GPU %.16s", r->gpu);
    switch (c.liveness) {
    case AST_CLAIM_LIVE: printf("on %s, pid %d%s, for %s\n", c.host[0] ? c.host : "this host", pid, job, took); break;
    case AST_CLAIM_REMOTE:
        printf("on %s, pid %d%s, claimed %s ago (another host's claim: not checked from here)\n", c.host, pid, job, took);
        break;
    case AST_CLAIM_STALE:
        printf("its runner (pid %d%s) died; the next runner resumes it from its checkpoint\n", c.pid, job);
        break;
    case AST_CLAIM_NONE: printf("no claim: its runner died; the next runner resumes it from its checkpoint\n"); break;
    }
}

static void print_run(const char *dir, const ast_ledger_run *r)
{
    printf("  %-8s %-40s ", ast_run_state_name(r->state), r->run);
    if (r->state == AST_RUN_RUNNING) print_claim(dir, r);
    else if (r->state == AST_RUN_FAILED) printf("%s; see %s/runs/%s/train.log\n", r->reason ? r->reason : "failed", dir, r->run);
    else if (r->reason) printf("%s: resumes from its checkpoint\n", r->reason);
    else printf("not started\n");
}

/* The job arrays DIR/slurm/jobs lists ("1234 12 <time>" per line). */
static void print_jobs(const char *dir)
{
    char path[4200], line[256];
    snprintf(path, sizeof path, "%s/slurm/jobs", dir);
    FILE *f = ast_fopen_regular(path, NULL);
    if (!f) return;
    printf("Slurm job arrays submitted:");
    char job[64];
    int tasks, n = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %d", job, &tasks) == 2) printf("%s %s (%d task%s)", n++ ? "," : "", job, tasks, tasks > 1 ? "s" : "");
    printf("%s; task logs in %s/slurm/\n", n ? "" : " none", dir);
    fclose(f);
}

int sweep_status(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/ledger.jsonl", dir);
    if (access(path, F_OK)) {
        fprintf(stderr, "%s sweep: %s: no ledger.jsonl: not a sweep directory, or no runner has started there yet\n",
                CLI_PROG, dir);
        return CLI_FAILED;
    }
    ast_error e = {""};
    ast_ledger *l = ast_ledger_read(dir, &e);
    if (!l) return cli_fail(&e);
    int n = ast_ledger_n_runs(l), in[4] = {0};
    for (int i = 0; i < n; i++) in[ast_ledger_run_at(l, i)->state]++;
    printf("%s: %d runs: %d done, %d running, %d pending, %d failed\n", dir, n, in[AST_RUN_DONE], in[AST_RUN_RUNNING],
           in[AST_RUN_PENDING], in[AST_RUN_FAILED]);
    static const ast_run_state shown[] = {AST_RUN_RUNNING, AST_RUN_PENDING, AST_RUN_FAILED};
    for (int k = 0; k < 3; k++)
        for (int i = 0, listed = 0; i < n; i++) {
            const ast_ledger_run *r = ast_ledger_run_at(l, i);
            if (r->state != shown[k]) continue;
            if (shown[k] == AST_RUN_PENDING && listed++ == MAX_PENDING_SHOWN) {
                printf("  ... and %d more pending\n", in[AST_RUN_PENDING] - MAX_PENDING_SHOWN);
                break;
            }
            print_run(dir, r);
        }
    /* Claims keep this from happening; if it ever does, it must show. */
    for (int i = 0; i < n; i++) {
        const ast_ledger_run *r = ast_ledger_run_at(l, i);
        if (r->lines[AST_RUN_DONE] > 1) printf("warning: %s was recorded done %d times\n", r->run, r->lines[AST_RUN_DONE]);
    }
    print_jobs(dir);
    ast_ledger_free(l);
    return CLI_OK;
}
