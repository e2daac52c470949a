/* What each run was, in full: the settings of config.yaml that every used
 * run shares, once, and per run its own settings, its data file and
 * whatever its provenance.json records (versions, commits, plugin hashes),
 * key by key as the file has them. With this a run can be redone, or two
 * runs told apart, from the report alone. */
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

/* provenance.json's leaves as "a.b=value"; arrays as JSON. */
static void flatten(const cJSON *o, const char *prefix, ast_strlist *out)
{
    char key[512], buf[1024];
    for (const cJSON *c = o->child; c; c = c->next) {
        snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", c->string ? c->string : "?");
        if (cJSON_IsObject(c)) {
            flatten(c, key, out);
            continue;
        }
        char *json = cJSON_IsString(c) ? NULL : cJSON_PrintUnformatted(c);
        snprintf(buf, sizeof buf, "%s=%s", key, json ? json : c->valuestring);
        cJSON_free(json);
        ast_strlist_push(out, buf);
    }
}

static void provenance_of(const rp_sweep *s, const rp_run *r, ast_strlist *out)
{
    char path[4096];
    rp_run_file(r, s->dir, "provenance.json", path, sizeof path);
    cJSON *o = rp_json_read_file(path);
    if (o) flatten(o, "", out);
    cJSON_Delete(o);
}

/* The run's value of `key` among its settings, or "". */
static const char *setting(const rp_run *r, const char *key)
{
    size_t n = strlen(key);
    for (int i = 0; i < r->settings.n; i++)
        if (!strncmp(r->settings.v[i], key, n) && r->settings.v[i][n] == '=') return r->settings.v[i] + n + 1;
    return "";
}

static void shared_table(rp_doc *d, const ast_strlist *shared)
{
    rp_table t;
    rp_table_init(&t, 2);
    rp_table_cell(&t, "setting"), rp_table_cell(&t, "value");
    for (int i = 0; i < shared->n; i++) {
        const char *eq = strchr(shared->v[i], '=');
        rp_table_cell(&t, "%.*s", (int)(eq - shared->v[i]), shared->v[i]);
        rp_table_cell(&t, "%s", eq + 1);
    }
    rp_doc_table(d, &t);
    rp_table_free(&t);
}

static void run_row(rp_table *t, const rp_sweep *s, const rp_run *r, const ast_strlist *shared)
{
    ast_strlist own = {0}, prov = {0};
    char a[4096], b[4096];
    for (int i = 0; i < r->settings.n; i++)
        if (ast_strlist_find(shared, r->settings.v[i]) < 0) ast_strlist_push(&own, r->settings.v[i]);
    provenance_of(s, r, &prov);
    rp_table_cell(t, "%s", r->id), rp_table_cell(t, "%s", r->config);
    rp_table_cell(t, "%s", setting(r, "data.path"));
    rp_table_cell(t, "%s", r->settings.n ? ast_strlist_join(&own, ", ", "none", a, sizeof a) : "no config.yaml");
    rp_table_cell(t, "%s", ast_strlist_join(&prov, ", ", "no provenance.json", b, sizeof b));
    ast_strlist_free(&own), ast_strlist_free(&prov);
}

void rp_provenance_section(rp_doc *d, const rp_sweep *s)
{
    int *used = ast_xmalloc((size_t)(s->n_runs + 1) * sizeof *used), n = 0;
    for (int i = 0; i < s->n_runs; i++)
        if (s->runs[i].usable) used[n++] = i;
    ast_strlist shared = {0};
    int known = rp_common_settings(s, used, n, &shared);
    rp_doc_heading(d, 2, "Config and provenance");
    if (known) {
        rp_doc_para(d, "The settings of config.yaml that every used run shares:");
        shared_table(d, &shared);
    }
    rp_table t;
    rp_table_init(&t, 5);
    rp_table_cell(&t, "run"), rp_table_cell(&t, "config"), rp_table_cell(&t, "data file");
    rp_table_cell(&t, "its own settings"), rp_table_cell(&t, "provenance");
    for (int i = 0; i < n; i++) run_row(&t, s, &s->runs[used[i]], &shared);
    rp_doc_para(d, "Per run: the settings it does not share with every other run, and what its provenance.json records "
                   "(versions, commits, plugin hashes), as the file has it.");
    rp_doc_table(d, &t);
    rp_table_free(&t);
    ast_strlist_free(&shared);
    free(used);
}
