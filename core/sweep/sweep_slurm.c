/* Slurm options, checked as they are given, and the batch script of a
 * sweep's job array (slurm.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/config.h"
#include "sweep/slurm.h"

/* ---- checking values ------------------------------------------------------ */

/* 1 if s is one or more digits (and no more than 9: no overflow). */
static int digits(const char *s, size_t n)
{
    if (!n || n > 9) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* Splits s at ':' into at most 3 numbers; their count, or -1. */
static int colon_parts(const char *s, long part[3])
{
    int n = 0;
    for (const char *p = s;; n++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (n == 3 || !digits(p, len)) return -1;
        part[n] = strtol(p, NULL, 10);
        if (!end) return n + 1;
        p = end + 1;
    }
}

long ast_slurm_time_seconds(const char *text)
{
    if (!strcasecmp(text, "UNLIMITED") || !strcasecmp(text, "INFINITE")) return 0;
    const char *dash = strchr(text, '-');
    long days = 0, part[3];
    if (dash) {
        if (!digits(text, (size_t)(dash - text))) return -1;
        days = strtol(text, NULL, 10);
        text = dash + 1;
    }
    int n = colon_parts(text, part);
    if (n < 0) return -1;
    /* Below the first part, minutes and seconds are below 60. */
    for (int i = 1; i < n; i++)
        if (part[i] > 59) return -1;
    long h = 0, m = 0, s = 0;
    if (dash) h = part[0], m = n > 1 ? part[1] : 0, s = n > 2 ? part[2] : 0; /* days-hours[:minutes[:seconds]] */
    else if (n == 3) h = part[0], m = part[1], s = part[2];                  /* hours:minutes:seconds */
    else m = part[0], s = n > 1 ? part[1] : 0;                               /* minutes[:seconds] */
    long total = ((days * 24 + h) * 60 + m) * 60 + s;
    return total > 0 ? total : -1;
}

/* A partition name, or a comma-separated list of them. */
static int partition_ok(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_.,-", *s)) return 0;
    return 1;
}

/* A number with an optional unit: 16000, 16000M, 8G, 1T. */
static int mem_ok(const char *s)
{
    size_t n = strlen(s);
    if (n && strchr("KMGTkmgt", s[n - 1])) n--;
    return digits(s, n);
}

/* An sbatch option: "-x" or "--name[=value]", printable, without quotes
 * (sbatch reads #SBATCH lines with its own quoting rules) or blanks. */
static int sbatch_word_ok(const char *s)
{
    if (s[0] != '-' || !s[1]) return 0;
    for (; *s; s++)
        if (!isgraph((unsigned char)*s) || strchr("\"'\\", *s)) return 0;
    return 1;
}

static int set_text(char **field, const char *value, int ok, const char *want, ast_error *e)
{
    if (!ok) {
        char shown[128];
        ast_cfg_escape(value, shown, sizeof shown);
        ast_error_set(e, "'%s' is not %s", shown, want);
        return -1;
    }
    free(*field);
    *field = ast_xstrdup(value);
    return 0;
}

static int set_count(int *field, const char *value, long most, ast_error *e)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (end == value || *end || v < 1 || v > most) {
        char shown[128];
        ast_cfg_escape(value, shown, sizeof shown);
        ast_error_set(e, "'%s' is not a whole number from 1 to %ld", shown, most);
        return -1;
    }
    *field = (int)v;
    return 0;
}

static int add_sbatch(ast_slurm_opts *o, const char *value, ast_error *e)
{
    char *copy = ast_xstrdup(value), *save = NULL;
    int rc = 0, words = 0;
    for (char *w = strtok_r(copy, " \t", &save); w && !rc; w = strtok_r(NULL, " \t", &save), words++) {
        if (!sbatch_word_ok(w)) {
            char shown[128];
            ast_cfg_escape(w, shown, sizeof shown);
            ast_error_set(e, "'%s' is not an sbatch option; give options such as --qos=high or --account=lab, each "
                             "one word without quotes", shown);
            rc = -1;
            break;
        }
        o->sbatch = ast_xrealloc(o->sbatch, (size_t)(o->n_sbatch + 1) * sizeof *o->sbatch);
        o->sbatch[o->n_sbatch++] = ast_xstrdup(w);
    }
    if (!rc && !words) ast_error_set(e, "no option given; give options such as --qos=high"), rc = -1;
    free(copy);
    return rc;
}

int ast_slurm_opt_set(ast_slurm_opts *o, const char *key, const char *value, ast_error *e)
{
    if (!strcmp(key, "partition"))
        return set_text(&o->partition, value, partition_ok(value),
                        "a partition name (letters, digits, '_', '.', '-'; several separated by ',')", e);
    if (!strcmp(key, "time"))
        return set_text(&o->time, value, ast_slurm_time_seconds(value) >= 0,
                        "a Slurm time limit: minutes (90), hours:minutes:seconds (4:00:00), days-hours (1-12), "
                        "days-hours:minutes[:seconds] or UNLIMITED", e);
    if (!strcmp(key, "mem"))
        return set_text(&o->mem, value, mem_ok(value), "an amount of memory per node: a number with an "
                        "optional unit K, M, G or T (8G, 16000M)", e);
    if (!strcmp(key, "cpus_per_task")) return set_count(&o->cpus_per_task, value, 4096, e);
    if (!strcmp(key, "tasks")) return set_count(&o->tasks, value, 1000000, e);
    if (!strcmp(key, "sbatch")) return add_sbatch(o, value, e);
    ast_error_set(e, "'%s' is not a Slurm option (known: partition, time, mem, cpus_per_task, tasks, sbatch)", key);
    return -1;
}

/* The sbatch options that only ask for resources (or label the job:
 * --comment), which a restricted sweep script may give. The others choose
 * files (--output, --error, --input, --chdir), the tasks' environment
 * (--export, --get-user-env), what runs them (--container, --bb), whom
 * they run as (--uid, --gid) or their priority (--nice, negative for root).
 * Long names only, matched whole: sbatch reads clustered short options
 * ("-Ho/tmp/x" is -H -o /tmp/x) and abbreviations of long ones (--exp is
 * --export). */
static const char *const resource_options[] = {
    "--partition", "--qos", "--account", "--reservation", "--time", "--time-min", "--mem", "--mem-per-cpu",
    "--mem-per-gpu", "--cpus-per-task", "--cpus-per-gpu", "--gres", "--gpus", "--gpus-per-node", "--gpus-per-task",
    "--gpus-per-socket", "--constraint", "--nodes", "--ntasks", "--ntasks-per-node", "--ntasks-per-core",
    "--ntasks-per-socket", "--ntasks-per-gpu", "--sockets-per-node", "--cores-per-socket", "--threads-per-core",
    "--exclusive", "--tmp", "--licenses", "--hint", "--comment",
};

int ast_slurm_check_resources_only(const ast_slurm_opts *o, ast_error *e)
{
    for (int i = 0; i < o->n_sbatch; i++) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(o->sbatch[i], "="), o->sbatch[i]);
        if (ast_name_index(name, resource_options, (int)(sizeof resource_options / sizeof *resource_options)) >= 0)
            continue;
        char shown[128];
        ast_cfg_escape(name, shown, sizeof shown);
        ast_error_set(e, "'%s' does more than ask for resources (the options that only ask: --partition, --qos, "
                         "--account, --time, --mem, --gres, --gpus, --constraint, --cpus-per-task, --nodes, --ntasks "
                         "and the like, in their long form)", shown);
        return -1;
    }
    return 0;
}

static void take_text(char **field, const char *over)
{
    if (!over) return;
    free(*field);
    *field = ast_xstrdup(over);
}

void ast_slurm_opts_override(ast_slurm_opts *o, const ast_slurm_opts *over)
{
    take_text(&o->partition, over->partition);
    take_text(&o->time, over->time);
    take_text(&o->mem, over->mem);
    if (over->cpus_per_task) o->cpus_per_task = over->cpus_per_task;
    if (over->tasks) o->tasks = over->tasks;
    if (!over->n_sbatch) return;
    for (int i = 0; i < o->n_sbatch; i++) free(o->sbatch[i]);
    o->sbatch = ast_xrealloc(o->sbatch, (size_t)over->n_sbatch * sizeof *o->sbatch);
    for (int i = 0; i < over->n_sbatch; i++) o->sbatch[i] = ast_xstrdup(over->sbatch[i]);
    o->n_sbatch = over->n_sbatch;
}

void ast_slurm_opts_free(ast_slurm_opts *o)
{
    free(o->partition), free(o->time), free(o->mem);
    for (int i = 0; i < o->n_sbatch; i++) free(o->sbatch[i]);
    free(o->sbatch);
    *o = (ast_slurm_opts){0};
}

/* ---- the batch script ------------------------------------------------------ */

/* Paths go on #SBATCH lines, which sbatch splits at blanks and reads
 * quotes in, and into --output, where '%' starts a pattern (%A, %a). */
static int path_ok(const char *what, const char *path, ast_error *e)
{
    for (const char *p = path; *p; p++)
        if (!isgraph((unsigned char)*p) || strchr("\"'\\%", *p)) {
            ast_error_set(e, "%s %s has a '%c', which an #SBATCH line cannot hold; choose a directory whose path has "
                             "no blanks, quotes, backslashes or '%%'", what, path, isgraph((unsigned char)*p) ? *p : ' ');
            return -1;
        }
    return 0;
}

/* 'text' for the shell, each ' written as '\'' */
static void shell_quote(FILE *f, const char *text)
{
    fputc('\'', f);
    for (; *text; text++)
        if (*text == '\'') fputs("'\\''", f);
        else fputc(*text, f);
    fputc('\'', f);
}

/* The job's name: the sweep's, in characters every tool shows as they are. */
static void job_name(FILE *f, const char *name)
{
    fputs("alphast-", f);
    for (; *name; name++) fputc(isalnum((unsigned char)*name) || strchr("_.-", *name) ? *name : '_', f);
}

static long warn_seconds(const ast_slurm_opts *o)
{
    long limit = o->time ? ast_slurm_time_seconds(o->time) : 0;
    return limit > 0 && limit < 8 * 60 ? (limit / 4 > 1 ? limit / 4 : 1) : AST_SLURM_WARN_SECONDS;
}

char *ast_slurm_script(const ast_slurm_opts *o, const ast_slurm_array *a, ast_error *e)
{
    if (path_ok("the sweep directory", a->sweep_dir, e) < 0 || path_ok("the working directory", a->workdir, e) < 0)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fputs("#!/bin/bash\n", f);
    fprintf(f, "# The sweep '%s' as a Slurm job array, written by `alphast-run sweep --executor slurm`.\n"
               "# Each task claims runs from %s/ledger.jsonl until none is left,\n"
               "# so submitting it again, or with more tasks, never runs a run twice. On SIGUSR1\n"
               "# (before the time limit) or SIGTERM (preemption) the runs write a checkpoint and go\n"
               "# back to pending; on SIGUSR1 the task requeues itself (docs/cluster.md).\n",
            a->name, a->sweep_dir);
    fputs("#SBATCH --job-name=", f);
    job_name(f, a->name);
    fprintf(f, "\n#SBATCH --array=0-%d\n", a->tasks - 1);
    fprintf(f, "#SBATCH --output=%s/slurm/%%A_%%a.out\n#SBATCH --open-mode=append\n", a->sweep_dir);
    fprintf(f, "#SBATCH --chdir=%s\n", a->workdir);
    fprintf(f, "#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=%d\n", a->cpus_per_task);
    fprintf(f, "#SBATCH --requeue\n#SBATCH --signal=B:USR1@%ld\n", warn_seconds(o));
    if (o->partition) fprintf(f, "#SBATCH --partition=%s\n", o->partition);
    if (o->time) fprintf(f, "#SBATCH --time=%s\n", o->time);
    if (o->mem) fprintf(f, "#SBATCH --mem=%s\n", o->mem);
    for (int i = 0; i < o->n_sbatch; i++) fprintf(f, "#SBATCH %s\n", o->sbatch[i]);
    fputs("exec", f);
    for (int i = 0; i < a->n_worker; i++) {
        fputc(' ', f);
        shell_quote(f, a->worker[i]);
    }
    fputs("\n", f);
    fclose(f);
    return text;
}
