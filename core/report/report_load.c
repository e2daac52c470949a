/* Reading a sweep directory: the ledger (JSON lines, the last line of a run
 * wins), then each run's directory, grouped by config in ledger order. */
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

static char *json_string_or(const cJSON *o, const char *key, const char *fallback)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) return ast_xstrdup(v->valuestring);
    return fallback ? ast_xstrdup(fallback) : NULL;
}

/* What the ledger says about an unfinished run: its reason, else how the
 * process ended (alphast/ledger.h: reason, signal, exit). */
static char *why_not_done(const cJSON *o)
{
    char buf[256];
    double sig = rp_json_number(o, "signal"), code = rp_json_number(o, "exit");
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "reason"))) return json_string_or(o, "reason", NULL);
    if (sig > 0) return snprintf(buf, sizeof buf, "killed by signal %.0f", sig), ast_xstrdup(buf);
    if (code > 0) return snprintf(buf, sizeof buf, "exited with status %.0f", code), ast_xstrdup(buf);
    return NULL;
}

static int find_run(const rp_sweep *s, const char *id)
{
    for (int i = 0; i < s->n_runs; i++)
        if (!strcmp(s->runs[i].id, id)) return i;
    return -1;
}

/* A later line for the same run replaces the earlier one. */
static void ledger_entry(rp_sweep *s, const cJSON *o)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "run");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(o, "config_name");
    if (!cJSON_IsString(id) || !cJSON_IsString(cfg)) {
        s->bad_ledger_lines++;
        return;
    }
    int i = find_run(s, id->valuestring);
    if (i < 0) {
        s->runs = ast_xrealloc(s->runs, (size_t)(s->n_runs + 1) * sizeof *s->runs);
        i = s->n_runs++;
    } else {
        rp_run_free(&s->runs[i]);
    }
    rp_run *r = &s->runs[i];
    memset(r, 0, sizeof *r);
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
    r->id = ast_xstrdup(id->valuestring);
    r->config = ast_xstrdup(cfg->valuestring);
    r->state = json_string_or(o, "state", "unknown");
    r->dir = json_string_or(o, "dir", NULL);
    r->error = why_not_done(o);
    r->seed = cJSON_IsNumber(seed) ? (long long)seed->valuedouble : -1;
}

static int read_ledger(rp_sweep *s, ast_error *e)
{
    char path[4096], *line = NULL;
    size_t cap = 0;
    snprintf(path, sizeof path, "%s/ledger.jsonl", s->dir);
    FILE *f = ast_fopen_regular(path, e);
    if (!f) return -1;
    while (getline(&line, &cap, f) > 0) {
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        cJSON *o = cJSON_Parse(line);
        if (cJSON_IsObject(o)) ledger_entry(s, o);
        else s->bad_ledger_lines++; /* e.g. a line torn by a crash */
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    if (!s->n_runs) ast_error_set(e, "%s: no runs in the ledger; has the sweep started?", path);
    return s->n_runs ? 0 : -1;
}

/* The index of a held-out protocol in s->protocols, added when new. */
static int protocol_index(rp_sweep *s, const char *protocol)
{
    int i = ast_strlist_find(&s->protocols, protocol);
    if (i >= 0) return i;
    ast_strlist_push(&s->protocols, protocol);
    return s->protocols.n - 1;
}

/* Runs written before summary.json named the protocol, beside runs that
 * name one, are a group of their own rather than pooled with any; when no
 * run names one, the sweep stays one group, as it was read before. */
static void group_unnamed(rp_sweep *s)
{
    for (int c = 0; s->protocols.n && c < s->n_configs; c++)
        if (s->configs[c].protocol < 0 && s->configs[c].n_runs)
            s->configs[c].protocol = protocol_index(s, "a protocol its runs do not record (written before data.split)");
}

static int config_index(rp_sweep *s, const char *name)
{
    for (int i = 0; i < s->n_configs; i++)
        if (!strcmp(s->configs[i].name, name)) return i;
    s->configs = ast_xrealloc(s->configs, (size_t)(s->n_configs + 1) * sizeof *s->configs);
    s->configs[s->n_configs] = (rp_config){.name = ast_xstrdup(name), .protocol = -1,
                                           .runs = ast_xmalloc((size_t)s->n_runs * sizeof(int))};
    return s->n_configs++;
}

/* Numeric members of obj, and of its objects one level down as "a.b". */
static void add_numeric_keys(ast_strlist *keys, const cJSON *obj, const char *prefix)
{
    const cJSON *item;
    char key[512];
    cJSON_ArrayForEach(item, obj)
    {
        snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", item->string);
        if (cJSON_IsNumber(item) && ast_strlist_find(keys, key) < 0) ast_strlist_push(keys, key);
        if (cJSON_IsObject(item) && !prefix[0]) add_numeric_keys(keys, item, key);
    }
}

static void add_name(ast_strlist *l, const char *name)
{
    if (ast_strlist_find(l, name) < 0) ast_strlist_push(l, name);
}

/* Step counts in numeric order ("5" before "10"). */
static void add_step(ast_strlist *steps, const char *count)
{
    if (ast_strlist_find(steps, count) >= 0) return;
    ast_strlist_push(steps, count);
    for (int i = steps->n - 1; i > 0 && atof(steps->v[i - 1]) > atof(steps->v[i]); i--) {
        char *t = steps->v[i];
        steps->v[i] = steps->v[i - 1], steps->v[i - 1] = t;
    }
}

static rp_task *task_of(rp_sweep *s, const char *name)
{
    for (int i = 0; i < s->n_tasks; i++)
        if (!strcmp(s->tasks[i].name, name)) return &s->tasks[i];
    s->tasks = ast_xrealloc(s->tasks, (size_t)(s->n_tasks + 1) * sizeof *s->tasks);
    s->tasks[s->n_tasks] = (rp_task){.name = ast_xstrdup(name)};
    return &s->tasks[s->n_tasks++];
}

/* Every metric, baseline and step count a usable run reports, in order of
 * first appearance, and its monitors. */
static void collect_keys(rp_sweep *s, const rp_run *r)
{
    const cJSON *task, *item;
    cJSON_ArrayForEach(task, r->eval)
    {
        rp_task *t = task_of(s, task->string);
        add_numeric_keys(&t->keys, cJSON_GetObjectItemCaseSensitive(task, "model"), "");
        cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(task, "baselines")) add_name(&t->baselines, item->string);
        cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(task, "by_steps")) add_step(&t->steps, item->string);
        t->uncertainty |= cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(task, "uncertainty"));
    }
    for (int m = 0; m < r->n_mon; m++) add_name(&s->monitors, r->mon[m].name);
}

/* The metrics the verdict ranks by, as alphast/evaluate.h's primary metric
 * (knn_k10 for positions, pcc_gene for expression), with the per-cell
 * distance ranks second for positions; kNN preservation for the layout
 * before k was fixed. */
static void pick_primary(rp_task *t)
{
    static const char *const ranked[] = {"knn_k10", "dist_row_spearman", "pcc_gene", "knn_preservation"};
    for (size_t i = 0; i < sizeof ranked / sizeof *ranked; i++) {
        int k = ast_strlist_find(&t->keys, ranked[i]);
        if (k < 0) continue;
        if (!t->primary) t->primary = t->keys.v[k];
        else if (!t->second && !strcmp(ranked[i], "dist_row_spearman")) t->second = t->keys.v[k];
    }
}

static int pick_reference(rp_sweep *s, const char *name, ast_error *e)
{
    s->reference = 0;
    for (int i = 0; i < s->n_configs; i++)
        if (!strcmp(s->configs[i].name, name ? name : "Baseline")) s->reference = i;
    if (!name || !strcmp(s->configs[s->reference].name, name)) return 0;
    ast_strlist names = {0};
    char buf[1024];
    for (int i = 0; i < s->n_configs; i++) ast_strlist_push(&names, s->configs[i].name);
    ast_error_set(e, "%s: no config named '%s' to use as the reference config; the sweep has %s", s->dir, name,
                  ast_strlist_join(&names, ", ", "none", buf, sizeof buf));
    ast_strlist_free(&names);
    return -1;
}

int rp_sweep_load(rp_sweep *s, const char *dir, const char *reference, ast_error *e)
{
    memset(s, 0, sizeof *s);
    s->dir = ast_xstrdup(dir);
    const char *slash = strrchr(dir, '/');
    s->name = ast_xstrdup(slash && slash[1] ? slash + 1 : dir);
    if (read_ledger(s, e) < 0) return -1;
    for (int i = 0; i < s->n_runs; i++) {
        rp_run *r = &s->runs[i];
        rp_run_read(r, s->dir);
        int ci = config_index(s, r->config); /* may move s->configs */
        rp_config *c = &s->configs[ci];
        c->n_ledger++;
        if (!r->usable) continue;
        if (!c->n_runs) c->protocol = r->protocol ? protocol_index(s, r->protocol) : -1;
        c->runs[c->n_runs++] = i;
        collect_keys(s, r);
    }
    group_unnamed(s);
    rp_drop_repeats(s);
    for (int t = 0; t < s->n_tasks; t++) pick_primary(&s->tasks[t]);
    if (pick_reference(s, reference, e) < 0) return -1;
    rp_family_make(s);
    return 0;
}

void rp_sweep_free(rp_sweep *s)
{
    for (int i = 0; i < s->n_runs; i++) rp_run_free(&s->runs[i]);
    for (int i = 0; i < s->n_configs; i++) free(s->configs[i].name), free(s->configs[i].runs);
    for (int i = 0; i < s->n_tasks; i++) {
        rp_task *t = &s->tasks[i];
        free(t->name), ast_strlist_free(&t->keys), ast_strlist_free(&t->baselines), ast_strlist_free(&t->steps);
    }
    rp_family_free(&s->family);
    free(s->runs), free(s->configs), free(s->tasks), free(s->dir), free(s->name);
    ast_strlist_free(&s->protocols);
    ast_strlist_free(&s->monitors);
    ast_strlist_free(&s->repeats);
    memset(s, 0, sizeof *s);
}
