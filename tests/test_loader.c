/* The plugin loader against the fixtures in tests/plugins: search, ABI and
 * descriptor checks, option parsing, and each error message. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "plugin/loader.h"

#define FIXTURES ALPHAST_BUILD_DIR "/tests/plugins"

static void use_fixtures(void)
{
    ast_error e = {{0}};
    setenv("ALPHAST_PLUGIN_PATH", FIXTURES, 1);
    cr_assert(ast_plugins_init(&e), "%s", e.msg);
}

TestSuite(loader, .init = use_fixtures, .fini = ast_plugins_shutdown);

static const ast_plugin *load_ok(ast_plugin_kind kind, const char *name)
{
    ast_error e = {{0}};
    const ast_plugin *p = ast_plugin_load(kind, name, &e);
    cr_assert_not_null(p, "%s", e.msg);
    return p;
}

/* The error of loading a plugin that must not load. */
static const char *load_err(ast_plugin_kind kind, const char *name)
{
    static ast_error e;
    cr_assert_null(ast_plugin_load(kind, name, &e), "%s %s loaded", ast_kind_name(kind), name);
    return e.msg;
}

#define assert_has(msg, part) cr_assert(strstr((msg), (part)), "'%s' not in: %s", (part), (msg))

Test(loader, loads_the_valid_fixture)
{
    const ast_plugin *p = load_ok(AST_KIND_ATTENTION, "fixture");
    const ast_plugin_desc *d = ast_plugin_desc_of(p);
    cr_assert_eq(d->kind, AST_KIND_ATTENTION);
    cr_assert_str_eq(d->name, "fixture");
    cr_assert_str_eq(d->version, "1.2.3");
    cr_assert_eq(d->n_options, 6);
    assert_has(ast_plugin_path(p), "/tests/plugins/");
    assert_has(ast_plugin_path(p), "attn_fixture.so");
    cr_assert_eq(load_ok(AST_KIND_ATTENTION, "fixture"), p, "a second load must return the same handle");
}

/* A run records each plugin it loaded (plugins.json): a plugin built out
 * of tree left no version or hash behind. The digest is sha256sum's. */
Test(loader, provenance_names_each_loaded_plugin_with_its_file_s_sha256)
{
    load_ok(AST_KIND_ATTENTION, "fixture");
    ast_error e = {{0}};
    char *text = ast_plugins_provenance(&e), want[65] = "", cmd[4200];
    cr_assert_not_null(text, "%s", e.msg);
    cJSON *list = cJSON_Parse(text);
    cr_assert_eq(cJSON_GetArraySize(list), 1, "%s", text);
    const cJSON *p = cJSON_GetArrayItem(list, 0);
    cr_assert_str_eq(cJSON_GetObjectItem(p, "kind")->valuestring, "attention");
    cr_assert_str_eq(cJSON_GetObjectItem(p, "name")->valuestring, "fixture");
    cr_assert_str_eq(cJSON_GetObjectItem(p, "version")->valuestring, "1.2.3");
    const char *path = cJSON_GetObjectItem(p, "path")->valuestring;
    cr_assert(path[0] == '/' && strstr(path, "attn_fixture.so"), "%s", path);
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    FILE *sum = popen(cmd, "r");
    cr_assert(sum && fscanf(sum, "%64s", want) == 1, "%s", cmd);
    pclose(sum);
    cr_assert_str_eq(cJSON_GetObjectItem(p, "sha256")->valuestring, want);
    cJSON_Delete(list);
    free(text);
}

Test(loader, fixture_runs_through_the_host_table)
{
    const ast_plugin *p = load_ok(AST_KIND_ATTENTION, "fixture");
    const ast_plugin_desc *d = ast_plugin_desc_of(p);
    ast_optval opts[6];
    ast_error e;
    cr_assert(ast_plugin_options(p, NULL, 0, opts, &e), "%s", e.msg);
    char err[128] = "";
    ast_create_args args = {.host = ast_host_table(), .opts = opts};
    void *self = d->create(&args, err, sizeof err);
    cr_assert_not_null(self, "%s", err);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = ast_tensor_from(c, 2, (int64_t[]){2, 3}, (float[]){1, -2, 3, 4.5f, 0, 6});
    ast_tensor *y = d->forward(self, c, x, &(ast_fwd_args){0});
    cr_assert_neq(y, x);
    for (int i = 0; i < 6; i++) cr_assert_eq(y->data[i], x->data[i], "y[%d]", i);
    ast_plugin_destroy(d, self);
    ast_ctx_free(c);
}

Test(loader, unknown_plugin_lists_those_found)
{
    const char *msg = load_err(AST_KIND_ATTENTION, "fixtur");
    assert_has(msg, "no attention plugin named 'fixtur' (found: ");
    assert_has(msg, "fixture");
    assert_has(msg, FIXTURES);
    cr_assert_null(strstr(msg, "legacy"), "a monitor listed among attention plugins: %s", msg);
}

Test(loader, rejects_a_name_that_is_a_path)
{
    assert_has(load_err(AST_KIND_FFN, "../attn_fixture"), "is not a valid ffn plugin name");
}

Test(loader, abi_major_mismatch_names_both_versions)
{
    char want[128];
    const char *msg = load_err(AST_KIND_ATTENTION, "badabi");
    snprintf(want, sizeof want, "built for plugin ABI %d.0, which this alphast (ABI %d.%d) cannot load",
             AST_ABI_MAJOR + 1, AST_ABI_MAJOR, AST_ABI_MINOR);
    assert_has(msg, "attention plugin 'badabi' (");
    assert_has(msg, want);
}

Test(loader, a_descriptor_larger_than_its_abi_is_refused)
{
    char want[160];
    snprintf(want, sizeof want, "has a descriptor of 1073741824 bytes, larger than the %zu of ABI %d.%d",
             sizeof(ast_plugin_desc), AST_ABI_MAJOR, AST_ABI_MINOR);
    assert_has(load_err(AST_KIND_ATTENTION, "badsize"), want);
}

Test(loader, newer_minor_abi_is_refused)
{
    char want[128];
    snprintf(want, sizeof want, "built for plugin ABI %d.%d", AST_ABI_MAJOR, AST_ABI_MINOR + 1);
    assert_has(load_err(AST_KIND_ATTENTION, "newminor"), want);
}

Test(loader, missing_entry_symbol)
{
    const char *msg = load_err(AST_KIND_ATTENTION, "noentry");
    const char *why = strstr(msg, "does not export alphast_plugin_entry (");
    cr_assert_not_null(why, "%s", msg);
    cr_assert_neq(why[strlen("does not export alphast_plugin_entry (")], ')', "no lt_dlerror text: %s", msg);
    assert_has(msg, "AST_PLUGIN_DEFINE(desc)");
}

Test(loader, kind_must_match_the_file_prefix)
{
    assert_has(load_err(AST_KIND_ATTENTION, "wrongkind"),
               "declares kind 'ffn' but its file name says attention; rename the file to ffn_wrongkind");
}

Test(loader, invalid_option_default_is_caught_at_load)
{
    assert_has(load_err(AST_KIND_ATTENTION, "badopts"),
               "has an invalid default for option 'heads': it must be in [1, 64], got 0");
}

Test(loader, smaller_descriptor_is_zero_extended)
{
    const ast_plugin_desc *d = ast_plugin_desc_of(load_ok(AST_KIND_MONITOR, "legacy"));
    cr_assert_not_null(d->observe);
    cr_assert_null(d->active_params, "a field beyond struct_size was copied");
}

Test(loader, discover_keeps_only_valid_plugins)
{
    int n = 0, fixture = 0, legacy = 0;
    const ast_plugin *const *all = ast_plugins_discover(&n);
    for (int i = 0; i < n; i++) {
        const ast_plugin_desc *d = ast_plugin_desc_of(all[i]);
        fixture += d->kind == AST_KIND_ATTENTION && !strcmp(d->name, "fixture");
        legacy += d->kind == AST_KIND_MONITOR && !strcmp(d->name, "legacy");
        cr_assert(strcmp(d->name, "badabi") && strcmp(d->name, "badsize") && strcmp(d->name, "wrongkind") && strcmp(d->name, "noentry"),
                  "broken fixture %s discovered", d->name);
    }
    cr_assert_eq(fixture, 1);
    cr_assert_eq(legacy, 1);
}

Test(loader_path, plugin_path_entry_must_be_a_directory)
{
    ast_error e = {{0}};
    setenv("ALPHAST_PLUGIN_PATH", FIXTURES ":/nonexistent/plugins", 1);
    cr_assert_not(ast_plugins_init(&e));
    assert_has(e.msg, "ALPHAST_PLUGIN_PATH: '/nonexistent/plugins' is not a directory");
}

/* ---- options ------------------------------------------------------------ */

enum { ENABLED, HEADS, LR, SCALE, GATE, LABEL, N_OPTS };

static int parse(const ast_optsrc *src, int n, ast_optval *out, ast_error *e)
{
    return ast_plugin_options(load_ok(AST_KIND_ATTENTION, "fixture"), src, n, out, e);
}

static const char *option_err(const char *key, const char *value)
{
    static ast_error e;
    ast_optval out[N_OPTS];
    ast_optsrc src = {key, value, "cfg.yaml:7:9"};
    cr_assert_not(parse(&src, 1, out, &e), "%s: %s accepted", key, value);
    cr_assert_eq(strncmp(e.msg, "cfg.yaml:7:9: ", 14), 0, "no location: %s", e.msg);
    return e.msg;
}

Test(loader, defaults_fill_every_option)
{
    ast_optval v[N_OPTS];
    ast_error e;
    cr_assert(parse(NULL, 0, v, &e), "%s", e.msg);
    cr_assert_eq(v[ENABLED].i, 1);
    cr_assert_eq(v[HEADS].i, 4);
    cr_assert_eq(v[LR].f, 1e-3);
    cr_assert_eq(v[SCALE].f, -2.5);
    cr_assert_eq(v[GATE].i, 1);
    cr_assert_str_eq(v[GATE].s, "elementwise");
    cr_assert_str_eq(v[LABEL].s, "fixture");
}

Test(loader, values_of_every_type)
{
    ast_optsrc src[] = {{"enabled", "off", NULL}, {"heads", "64", NULL}, {"learning_rate", "1e-4", NULL},
                        {"scale", "1000", NULL}, {"gate", "none", NULL},  {"label", "a b", NULL}};
    ast_optval v[N_OPTS];
    ast_error e;
    cr_assert(parse(src, N_OPTS, v, &e), "%s", e.msg);
    cr_assert_eq(v[ENABLED].i, 0);
    cr_assert_eq(v[HEADS].i, 64);
    cr_assert_eq(v[LR].f, 1e-4);
    cr_assert_eq(v[SCALE].f, 1000.0, "min > max leaves the range unchecked");
    cr_assert_eq(v[GATE].i, 2);
    cr_assert_eq(v[LABEL].s, src[5].value, "strings point into the source");
}

Test(loader, yaml_booleans)
{
    const char *yes[] = {"true", "True", "yes", "on"}, *no[] = {"false", "FALSE", "no", "Off"};
    for (int i = 0; i < 4; i++) {
        ast_optval v[N_OPTS];
        ast_error e;
        cr_assert(parse(&(ast_optsrc){"enabled", yes[i], NULL}, 1, v, &e), "%s", e.msg);
        cr_assert_eq(v[ENABLED].i, 1, "%s", yes[i]);
        cr_assert(parse(&(ast_optsrc){"enabled", no[i], NULL}, 1, v, &e), "%s", e.msg);
        cr_assert_eq(v[ENABLED].i, 0, "%s", no[i]);
    }
}

Test(loader, unknown_option_suggests_the_closest)
{
    assert_has(option_err("learnig_rate", "0.1"),
               "attention plugin 'fixture' has no option 'learnig_rate' (did you mean 'learning_rate'?)");
    assert_has(option_err("hedas", "2"), "(did you mean 'heads'?)");
}

Test(loader, unknown_option_without_a_near_miss_lists_the_options)
{
    assert_has(option_err("dropout", "0.1"),
               "has no option 'dropout' (its options: enabled, heads, learning_rate, scale, gate, label)");
}

Test(loader, wrong_type)
{
    assert_has(option_err("enabled", "maybe"), "option 'enabled' of attention plugin 'fixture' expected a boolean");
    assert_has(option_err("heads", "4.5"), "expected an integer, got '4.5'");
    assert_has(option_err("heads", ""), "expected an integer");
    assert_has(option_err("learning_rate", "fast"), "expected a number");
    assert_has(option_err("learning_rate", "nan"), "expected a number");
}

Test(loader, out_of_range_shows_the_range)
{
    assert_has(option_err("heads", "65"), "option 'heads' of attention plugin 'fixture' must be in [1, 64], got 65");
    assert_has(option_err("heads", "0"), "must be in [1, 64], got 0");
    assert_has(option_err("learning_rate", "1.5"), "must be in [0, 1], got 1.5");
}

Test(loader, enum_lists_its_choices)
{
    assert_has(option_err("gate", "Headwise"), "must be one of headwise, elementwise, none; got 'Headwise'");
}

Test(loader, option_given_twice)
{
    ast_optsrc src[] = {{"heads", "2", "a.yaml:1:1"}, {"heads", "3", "a.yaml:2:1"}};
    ast_optval v[N_OPTS];
    ast_error e;
    cr_assert_not(parse(src, 2, v, &e));
    assert_has(e.msg, "a.yaml:2:1: option 'heads' of attention plugin 'fixture' is already given at a.yaml:1:1");
}
