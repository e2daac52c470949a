/* The sweep ledger: JSON lines appended with one write each (O_APPEND
 * makes concurrent appends land whole), read back as each run's history. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "sweep/ledger.h"

#define LEDGER_FILE "ledger.jsonl"

static const char *const state_names[] = {"pending", "running", "done", "failed"};

const char *ast_run_state_name(ast_run_state s) { return state_names[s]; }

static int parse_state(const char *s, ast_run_state *out)
{
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, state_names[i])) {
            *out = (ast_run_state)i;
            return 0;
        }
    return -1;
}

/* "\n" + the entry's JSON + "\n". */
static char *entry_line(const ast_ledger_entry *en)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "time", en->time > 0 ? en->time : ast_wall_clock());
    cJSON_AddStringToObject(o, "run", en->run);
    cJSON_AddStringToObject(o, "config_name", en->config_name);
    cJSON_AddNumberToObject(o, "seed", (double)en->seed);
    cJSON_AddStringToObject(o, "hash", en->hash);
    cJSON_AddStringToObject(o, "state", ast_run_state_name(en->state));
    cJSON_AddStringToObject(o, "dir", en->dir);
    if (en->pid) cJSON_AddNumberToObject(o, "pid", en->pid);
    if (en->host) cJSON_AddStringToObject(o, "host", en->host);
    if (en->job) cJSON_AddStringToObject(o, "job", en->job);
    if (en->gpu) cJSON_AddStringToObject(o, "gpu", en->gpu);
    if (en->start > 0) cJSON_AddNumberToObject(o, "start", en->start);
    if (en->end > 0) cJSON_AddNumberToObject(o, "end", en->end);
    if (en->exit_code >= 0) cJSON_AddNumberToObject(o, "exit", en->exit_code);
    if (en->signal) cJSON_AddNumberToObject(o, "signal", en->signal);
    if (en->reason) cJSON_AddStringToObject(o, "reason", en->reason);
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    size_t n = strlen(json);
    char *line = ast_xmalloc(n + 3); /* "\n" (used after a fragment) + json + "\n" */
    line[0] = '\n';
    memcpy(line + 1, json, n);
    memcpy(line + 1 + n, "\n", 2);
    cJSON_free(json);
    return line;
}

/* 1 if the ledger's last byte is not a newline: an append cut short (a
 * full disk) left half a line, and ours must not be glued to it. */
static int ends_mid_line(int fd)
{
    struct stat st;
    char last = '\n';
    if (fstat(fd, &st) == 0 && st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1) last = '\n';
    return last != '\n';
}

int ast_ledger_append(const char *sweep_dir, const ast_ledger_entry *en, ast_error *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", sweep_dir, LEDGER_FILE);
    char *line = entry_line(en);
    int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    /* One write per line, whole: O_APPEND places it at the end atomically,
     * so concurrent appends never interleave. After a fragment it starts
     * with a newline of its own; the reader skips the fragment. (Two
     * appenders that both see the fragment leave an empty line: harmless.) */
    const char *text = line + 1;
    if (fd >= 0 && ends_mid_line(fd)) text = line;
    size_t n = strlen(text);
    ssize_t written = fd < 0 ? -1 : write(fd, text, n);
    int err = errno;
    if (fd >= 0) close(fd);
    free(line);
    if (written != (ssize_t)n) {
        ast_error_set(e, "%s: cannot append: %s", path, written < 0 ? strerror(err) : "short write (disk full?)");
        return -1;
    }
    return 0;
}

/* The runs, each with its last line's fields, found by name through an
 * open-addressing table (a ledger of a long sweep has many thousands of
 * lines, read by every runner at every claim). */
struct ast_ledger {
    ast_ledger_run *runs;
    int n, cap;
    int *slots; /* index + 1 into runs, 0: empty; a power of two, at most half full */
    int n_slots;
};

static int *slot_of(const ast_ledger *l, const char *run)
{
    size_t mask = (size_t)l->n_slots - 1, i = (size_t)ast_fnv1a(AST_FNV_OFFSET, run, strlen(run)) & mask;
    while (l->slots[i] && strcmp(l->runs[l->slots[i] - 1].run, run)) i = (i + 1) & mask;
    return &l->slots[i];
}

static void grow_slots(ast_ledger *l)
{
    free(l->slots);
    l->n_slots = l->n_slots ? 2 * l->n_slots : 64;
    l->slots = ast_xcalloc((size_t)l->n_slots, sizeof *l->slots);
    for (int i = 0; i < l->n; i++) *slot_of(l, l->runs[i].run) = i + 1;
}

static ast_ledger_run *run_named(ast_ledger *l, const char *run)
{
    int *slot = slot_of(l, run);
    if (*slot) return &l->runs[*slot - 1];
    if (l->n == l->cap) l->runs = ast_xrealloc(l->runs, (size_t)(l->cap = l->cap ? 2 * l->cap : 64) * sizeof *l->runs);
    ast_ledger_run *r = &l->runs[l->n++];
    *r = (ast_ledger_run){.run = ast_xstrdup(run)};
    if (2 * l->n > l->n_slots) grow_slots(l);
    else *slot = l->n;
    return r;
}

/* A string field of the line, copied, or NULL. */
static char *text_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? ast_xstrdup(v->valuestring) : NULL;
}

static void set_text(const char **field, char *value)
{
    free((char *)*field);
    *field = value;
}

static void add_line(ast_ledger *l, const char *text)
{
    cJSON *o = cJSON_Parse(text);
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(o, "run");
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(o, "state");
    const cJSON *time = cJSON_GetObjectItemCaseSensitive(o, "time");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
    ast_run_state st;
    if (cJSON_IsString(run) && cJSON_IsString(state) && !parse_state(state->valuestring, &st)) {
        ast_ledger_run *r = run_named(l, run->valuestring);
        r->state = st;
        r->time = cJSON_IsNumber(time) ? time->valuedouble : 0;
        r->pid = cJSON_IsNumber(pid) ? pid->valueint : 0;
        r->lines[st]++;
        char *name = text_field(o, "config_name");
        if (name) set_text(&r->config_name, name);
        set_text(&r->reason, text_field(o, "reason"));
        set_text(&r->host, text_field(o, "host"));
        set_text(&r->job, text_field(o, "job"));
        set_text(&r->gpu, text_field(o, "gpu"));
    }
    cJSON_Delete(o);
}

ast_ledger *ast_ledger_read(const char *sweep_dir, ast_error *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", sweep_dir, LEDGER_FILE);
    ast_ledger *l = ast_xcalloc(1, sizeof *l);
    grow_slots(l);
    FILE *f = fopen(path, "r");
    if (!f && errno == ENOENT) return l;
    if (!f) {
        ast_error_set(e, "%s: cannot read: %s", path, strerror(errno));
        ast_ledger_free(l);
        return NULL;
    }
    char *text = NULL;
    size_t cap = 0;
    while (getline(&text, &cap, f) > 0) add_line(l, text);
    free(text);
    fclose(f);
    return l;
}

void ast_ledger_free(ast_ledger *l)
{
    if (!l) return;
    for (int i = 0; i < l->n; i++) {
        ast_ledger_run *r = &l->runs[i];
        free((char *)r->run), free((char *)r->config_name), free((char *)r->reason);
        free((char *)r->host), free((char *)r->job), free((char *)r->gpu);
    }
    free(l->runs);
    free(l->slots);
    free(l);
}

int ast_ledger_last(const ast_ledger *l, const char *run, ast_run_state *state, double *time)
{
    int slot = *slot_of(l, run);
    if (!slot) return 0;
    *state = l->runs[slot - 1].state;
    if (time) *time = l->runs[slot - 1].time;
    return 1;
}

int ast_ledger_count(const ast_ledger *l, const char *run, ast_run_state state)
{
    int slot = *slot_of(l, run);
    return slot ? l->runs[slot - 1].lines[state] : 0;
}

int ast_ledger_n_runs(const ast_ledger *l) { return l->n; }

const ast_ledger_run *ast_ledger_run_at(const ast_ledger *l, int i) { return &l->runs[i]; }
