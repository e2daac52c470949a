/* Sweep overrides (`alphast-run sweep -m KEY=V1,V2`, range(...), choice(...),
 * alphast.grid; ast_cfg_sweep_parse over config_hydra.c's grammar): the
 * input is up to 16 lines, one sweep override each. A failed parse says
 * why. A parsed one keeps its key, gives 1 to 100000 values (none for a
 * deletion), each trimmed and, in a sweep of several, not empty; each value
 * is one value: as KEY=VALUE it is a sweep of one, itself, and applied to a
 * small valid config it either sets the key or fails with a message,
 * leaving the config unchanged. The config still round-trips at the end. */
#include "fuzz_cfg.h"

#define MAX_LINES 16
#define MAX_APPLIED 4 /* values applied per override: a range gives up to 100000 */

static const char base_yaml[] =
    "seed: {value: 7}\n"
    "data: {path: data.h5ad, set_size: 12, split_ratio: {train: 0.8, val: 0.1, test: 0.1}}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 2, steps_per_epoch: 3,\n"
    "           scheduler: {type: cosine, T_max: 2}}\n"
    "attention: {name: gated, gate_type: headwise}\n"
    "ffn: dense\n"
    "monitors: [grad_norm]\n";

static int blank(char c) { return c == ' ' || c == '\t'; }

/* KEY=VALUE as a sweep is exactly VALUE. */
static void check_single(const char *key, const char *value)
{
    size_t n = strlen(key) + strlen(value) + 2;
    char *text = malloc(n);
    snprintf(text, n, "%s=%s", key, value);
    ast_cfg_sweep one;
    ast_error e = {""};
    FUZZ_CHECK(ast_cfg_sweep_parse(text, &one, &e) == 0 && one.n == 1 && !strcmp(one.values[0], value),
               "the sweep value '%s' is not one value: as '%s' it %s", value, text,
               e.msg[0] ? e.msg : "gives several");
    ast_cfg_sweep_free(&one);
    free(text);
}

/* KEY=VALUE applied: set, or refused with a message and no change. */
static void check_applies(ast_cfg *cfg, const char *key, const char *value)
{
    size_t n = strlen(key) + strlen(value) + 2;
    char *text = malloc(n);
    snprintf(text, n, "%s=%s", key, value);
    ast_error e = {""};
    char *before = ast_cfg_dump_string(cfg, &e);
    FUZZ_CHECK(before, "the config cannot be dumped: %s", e.msg);
    if (ast_cfg_override(cfg, text, &e) < 0) {
        FUZZ_CHECK_ERROR(&e, "ast_cfg_override");
        char *after = ast_cfg_dump_string(cfg, &e);
        FUZZ_CHECK(after && !strcmp(before, after), "a failed override '%s' changed the config", text);
        free(after);
    }
    free(before);
    free(text);
}

static void check_sweep(ast_cfg *cfg, const char *line, const ast_cfg_sweep *s)
{
    const char *eq = strchr(line, '=');
    FUZZ_CHECK(eq ? strlen(s->key) == (size_t)(eq - line) && !strncmp(s->key, line, strlen(s->key))
                  : line[0] == '~' && !strcmp(s->key, line) && s->n == 0,
               "'%s' parsed to the key '%s' with %d values", line, s->key, s->n);
    if (!eq) return;
    FUZZ_CHECK(s->n >= 1 && s->n <= 100000, "'%s' gave %d values", line, s->n);
    for (int i = 0; i < s->n; i++) {
        const char *v = s->values[i];
        size_t len = strlen(v);
        FUZZ_CHECK(!len || (!blank(v[0]) && !blank(v[len - 1])), "value %d '%s' of '%s' is not trimmed", i, v, line);
        FUZZ_CHECK(len || s->n == 1, "value %d of '%s' is empty", i, line);
        if (i >= MAX_APPLIED) continue;
        check_single(s->key, v);
        check_applies(cfg, s->key, v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(base_yaml, "base.yaml", &e);
    FUZZ_CHECK(cfg, "the base config does not load: %s", e.msg);
    char *text = fuzz_text(data, size), *line = text;
    for (int i = 0; i < MAX_LINES && line; i++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        ast_cfg_sweep s;
        e.msg[0] = 0;
        if (ast_cfg_sweep_parse(line, &s, &e) == 0) {
            check_sweep(cfg, line, &s);
            ast_cfg_sweep_free(&s);
        } else {
            FUZZ_CHECK_ERROR(&e, "ast_cfg_sweep_parse");
        }
        line = nl ? nl + 1 : NULL;
    }
    fuzz_cfg_roundtrip(cfg);
    ast_cfg_free(cfg);
    free(text);
    return 0;
}
