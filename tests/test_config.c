/* The configuration layer: the reference config.yaml loads and gives the
 * spec's sizes; every error is one located line; overrides; dump/reload. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/config_impl.h" /* the tree API, to build what loading refuses */
#include "model/model.h"

static ast_cfg *load_reference(void)
{
    const char *dir = getenv("ALPHAST_TEST_DATA");
    cr_assert(dir, "ALPHAST_TEST_DATA is not set");
    char path[1024];
    snprintf(path, sizeof path, "%s/reference_config.yaml", dir);
    ast_error e = {{0}};
    ast_cfg *cfg = ast_cfg_load_file(path, &e);
    cr_assert(cfg, "%s", e.msg);
    return cfg;
}

static ast_cfg *load(const char *text)
{
    ast_error e = {{0}};
    ast_cfg *cfg = ast_cfg_load_string(text, "t.yaml", &e);
    cr_assert(cfg, "%s", e.msg);
    return cfg;
}

/* Loading `text` fails with exactly `expected`. */
static void load_fails(const char *text, const char *expected)
{
    ast_error e = {{0}};
    ast_cfg *cfg = ast_cfg_load_string(text, "t.yaml", &e);
    cr_assert_null(cfg, "loaded although it should fail with: %s", expected);
    cr_assert_str_eq(e.msg, expected);
}

static const ast_optsrc *opt(const ast_optsrc *opts, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(opts[i].key, key)) return &opts[i];
    cr_assert_fail("option %s missing", key);
    return NULL;
}

static void assert_opt(const ast_optsrc *opts, int n, const char *key, const char *value, const char *where)
{
    const ast_optsrc *o = opt(opts, n, key);
    cr_assert_str_eq(o->value, value, "option %s", key);
    if (where) cr_assert(strstr(o->where, where), "option %s at %s, expected %s", key, o->where, where);
}

/* ---- the reference config ---------------------------------------------------- */

Test(config, reference_config_gives_the_spec_model)
{
    ast_cfg *cfg = load_reference();
    ast_model_config m;
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_model(cfg, 100, &m, &e), 0, "%s", e.msg);
    int got[] = {m.num_genes, m.expr_hidden, m.d_model, m.time_hidden, m.d_time, m.pos_hidden, m.num_layers,
                 m.num_heads, m.d_ff, m.d_ff_time, m.out_expr_hidden, m.out_pos_hidden, m.honour_mask};
    int want[] = {100, 128, 256, 64, 64, 64, 6, 8, 1024, 256, 512, 128, 1}; /* docs/model.md §1, config.yaml column */
    for (size_t i = 0; i < sizeof got / sizeof got[0]; i++) cr_assert_eq(got[i], want[i], "size %zu", i);
    cr_assert_eq(m.dropout, 0.1f);
    cr_assert_eq(m.ln_eps, 1e-6f);
    cr_assert_str_eq(m.attention, "gated");
    cr_assert_eq(m.n_attention_opts, 2);
    assert_opt(m.attention_opts, 2, "gate_type", "elementwise", "reference_config.yaml:86:14");
    assert_opt(m.attention_opts, 2, "use_qk_norm", "true", "reference_config.yaml:87:16");
    cr_assert_str_eq(m.ffn, "dense");
    cr_assert_eq(m.n_ffn_opts, 0);
    ast_cfg_free(cfg);
}

Test(config, reference_config_reads_yaml11_strings_as_numbers)
{
    ast_cfg *cfg = load_reference();
    /* strtod of the same text: exact, no tolerance needed */
    cr_assert_eq(ast_cfg_float(cfg, "training.learning_rate"), 1e-4);
    cr_assert_eq(ast_cfg_float(cfg, "training.weight_decay"), 1e-5);
    cr_assert_eq(ast_cfg_float(cfg, "training.scheduler.eta_min"), 1e-6);
    cr_assert_eq(ast_cfg_int(cfg, "seed.value"), 42);
    cr_assert_eq(ast_cfg_int(cfg, "distributed.deepspeed.stage"), 2);
    cr_assert_eq(ast_cfg_bool(cfg, "training.early_stopping"), 1);
    cr_assert_eq(ast_cfg_bool(cfg, "data.preprocessing.normalize_position"), 0);
    cr_assert_str_eq(ast_cfg_str(cfg, "training.precision"), "bf16-mixed");
    cr_assert_str_eq(ast_cfg_str(cfg, "data.preprocessing.position_key"), "ccf");
    cr_assert_null(ast_cfg_str(cfg, "data.preprocessing.gene_list_file"));
    cr_assert_eq(ast_cfg_float(cfg, "data.split_ratio.test"), 0.1);
    cr_assert_str_eq(ast_cfg_get(cfg, "distributed.devices")->value, "auto");
    ast_cfg_free(cfg);
}

Test(config, missing_keys_take_the_code_defaults)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\n");
    cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 5);
    cr_assert_eq(ast_cfg_int(cfg, "training.batch_size"), 32);
    cr_assert_eq(ast_cfg_float(cfg, "training.learning_rate"), 1e-4);
    cr_assert_str_eq(ast_cfg_str(cfg, "training.precision"), "32-true"); /* what alphast computes in */
    cr_assert_null(ast_cfg_get(cfg, "training.scheduler"), "absent scheduler means a constant rate");
    ast_model_config m;
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_model(cfg, 7, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(m.d_model, 256);
    cr_assert_eq(m.num_layers, 6);
    cr_assert_str_eq(m.attention, "linear");
    cr_assert_str_eq(m.ffn, "dense");
    cr_assert_eq(m.n_attention_opts + m.n_ffn_opts, 0);
    ast_cfg_free(cfg);
}

Test(config, scalars_follow_yaml11_by_the_key_type)
{
    ast_cfg *cfg = load("training:\n  learning_rate: 3\n  weight_decay: \"2.5e-3\"\n  gradient_clip_val: .5\n"
                        "  early_stopping: yes\nmasking:\n  enable: On\n  mask_position: off\n");
    cr_assert_eq(ast_cfg_float(cfg, "training.learning_rate"), 3.0);
    cr_assert_eq(ast_cfg_float(cfg, "training.weight_decay"), 2.5e-3);
    cr_assert_eq(ast_cfg_float(cfg, "training.gradient_clip_val"), 0.5);
    cr_assert_eq(ast_cfg_bool(cfg, "training.early_stopping"), 1);
    cr_assert_eq(ast_cfg_bool(cfg, "masking.enable"), 1);
    cr_assert_eq(ast_cfg_bool(cfg, "masking.mask_position"), 0);
    ast_cfg_free(cfg);
}

Test(config, base_config_is_compare_configs_base)
{
    ast_model_config m;
    ast_model_config_base(&m, 100);
    int got[] = {m.num_genes, m.expr_hidden, m.d_model, m.time_hidden, m.d_time, m.pos_hidden, m.num_layers,
                 m.num_heads, m.d_ff, m.d_ff_time, m.out_expr_hidden, m.out_pos_hidden, m.honour_mask};
    int want[] = {100, 64, 128, 32, 32, 32, 2, 4, 256, 64, 128, 64, 1}; /* docs/model.md §1 BASE_CONFIG column */
    for (size_t i = 0; i < sizeof got / sizeof got[0]; i++) cr_assert_eq(got[i], want[i], "size %zu", i);
    cr_assert_eq(m.dropout, 0.1f);
    cr_assert_eq(m.ln_eps, 1e-6f);
    cr_assert_str_eq(m.attention, "linear");
    cr_assert_str_eq(m.ffn, "dense");
    cr_assert_eq(m.n_attention_opts + m.n_ffn_opts, 0);
}

Test(config, yaml_scalar_helpers_take_only_their_own_spelling)
{
    static const char *floats[] = {"1", "-0.5", "+1.", ".5E+3", "1e-4", "3.0e10"};
    static const double values[] = {1, -0.5, 1, 500, 1e-4, 3e10};
    static const char *not_floats[] = {"", ".", "e3", "1e", "1e+", "inf", "nan", "0x10", "1.5x", " 1", "1,5"};
    static const char *not_ints[] = {"", "+", "1.0", "0x1", "1e3", "99999999999999999999", "7 "};
    double f;
    int64_t i;
    int b;
    for (size_t k = 0; k < sizeof floats / sizeof *floats; k++) {
        cr_assert_eq(ast_yaml_float(floats[k], &f), 0, "%s", floats[k]);
        cr_assert_eq(f, values[k], "%s", floats[k]);
    }
    for (size_t k = 0; k < sizeof not_floats / sizeof *not_floats; k++)
        cr_assert_eq(ast_yaml_float(not_floats[k], &f), -1, "'%s' accepted", not_floats[k]);
    for (size_t k = 0; k < sizeof not_ints / sizeof *not_ints; k++)
        cr_assert_eq(ast_yaml_int(not_ints[k], &i), -1, "'%s' accepted", not_ints[k]);
    cr_assert(ast_yaml_int("-42", &i) == 0 && i == -42);
    cr_assert(ast_yaml_bool("OFF", &b) == 0 && b == 0);
    cr_assert(ast_yaml_bool("Yes", &b) == 0 && b == 1);
    cr_assert_eq(ast_yaml_bool("1", &b), -1, "1 is an integer, not a bool, in YAML 1.1");
}

Test(config, did_you_mean_only_suggests_plausible_typos)
{
    static const char *const names[] = {"learning_rate", "epochs", "patience"};
    cr_assert_str_eq(ast_did_you_mean("epoch", names, 3), "epochs");
    cr_assert_str_eq(ast_did_you_mean("LEARNING_RTAE", names, 3), "learning_rate");
    cr_assert_null(ast_did_you_mean("lr", names, 3));
    cr_assert_null(ast_did_you_mean("batch_size", names, 3));
}

/* ---- plugins ------------------------------------------------------------------ */

Test(config, plugin_maps_pass_their_options_through)
{
    ast_cfg *cfg = load("attention: {name: gated, gate_type: headwise, qk_eps: 1e-5}\n"
                        "ffn:\n  name: moe\n  num_experts: 4\n  capacity_factor: 1.5\n");
    ast_model_config m;
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), 0, "%s", e.msg);
    cr_assert_str_eq(m.attention, "gated");
    cr_assert_eq(m.n_attention_opts, 2, "no switch options join an explicit plugin");
    assert_opt(m.attention_opts, 2, "gate_type", "headwise", "t.yaml:1:37");
    assert_opt(m.attention_opts, 2, "qk_eps", "1e-5", "t.yaml:1:55");
    cr_assert_str_eq(m.ffn, "moe");
    cr_assert_eq(m.n_ffn_opts, 2);
    assert_opt(m.ffn_opts, 2, "num_experts", "4", "t.yaml:4:16");
    assert_opt(m.ffn_opts, 2, "capacity_factor", "1.5", "t.yaml:5:20");
    ast_cfg_free(cfg);
}

Test(config, moe_switch_maps_reference_keys_to_options)
{
    ast_cfg *cfg = load("TransformerLayer_setting:\n  use_moe: true\n  num_experts: 4\n"
                        "  expert_capacity_factor: 1.25\n");
    ast_model_config m;
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), 0, "%s", e.msg);
    cr_assert_str_eq(m.ffn, "moe");
    cr_assert_eq(m.n_ffn_opts, 3, "expert_capacity_factor is ignored");
    assert_opt(m.ffn_opts, 3, "num_experts", "4", "t.yaml:3:16");
    assert_opt(m.ffn_opts, 3, "top_k", "2", "t.yaml:2:12");
    assert_opt(m.ffn_opts, 3, "load_balance_weight", "0.01", NULL);
    cr_assert_str_eq(m.attention, "linear");
    ast_cfg_free(cfg);
}

Test(config, agreeing_switch_and_plugin_merge_options)
{
    ast_cfg *cfg = load("attention: {name: gated, use_qk_norm: false}\n"
                        "TransformerLayer_setting:\n  use_gated_attention: true\n  gate_type: none\n");
    ast_model_config m;
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(m.n_attention_opts, 2);
    assert_opt(m.attention_opts, 2, "use_qk_norm", "false", "t.yaml:1:39");
    assert_opt(m.attention_opts, 2, "gate_type", "none", "t.yaml:4:14");
    ast_cfg_free(cfg);
}

Test(config, monitors_are_names_or_maps)
{
    ast_cfg *cfg = load("monitors:\n  - grad_norm\n  - {name: moe_balance, every: 10}\n");
    const ast_cfg_node *list = ast_cfg_get(cfg, "monitors");
    cr_assert_eq(list->n_items, 2);
    ast_cfg_plugin p;
    ast_cfg_plugin_of(list->items[0], &p);
    cr_assert_str_eq(p.name, "grad_norm");
    cr_assert_eq(p.n_opts, 0);
    ast_cfg_plugin_of(list->items[1], &p);
    cr_assert_str_eq(p.name, "moe_balance");
    cr_assert_eq(p.n_opts, 1);
    assert_opt(p.opts, 1, "every", "10", "t.yaml:3:32");
    cr_assert_str_eq(list->items[1]->path, "monitors[1]");
    ast_cfg_free(cfg);
}

/* ---- errors: one located line each -------------------------------------------- */

Test(config, malformed_yaml_names_line_column_and_key)
{
    load_fails("training:\n  epochs: 5\n   batch_size: 3\n",
               "t.yaml:3:14: training: YAML syntax error: mapping values are not allowed in this context; "
               "check the indentation, the ': ' after each key and the quotes");
    load_fails("training: [1, 2\n",
               "t.yaml:2:1: training: YAML syntax error: did not find expected ',' or ']' while parsing a flow "
               "sequence; check the indentation, the ': ' after each key and the quotes");
}

Test(config, unknown_key_suggests_the_closest_sibling)
{
    load_fails("training:\n  learnig_rate: 1e-3\n", "t.yaml:2:3: training.learnig_rate: unknown key; did you mean "
                                                    "'learning_rate'?");
    load_fails("positionmlp_setting:\n  hidden_dims: 3\n",
               "t.yaml:1:1: positionmlp_setting: unknown key; did you mean 'PositionMLP_setting'?");
    load_fails("training:\n  zzz: 1\n",
               "t.yaml:2:3: training.zzz: unknown key; the keys here are: learning_rate, weight_decay, "
               "batch_size, epochs, precision, gradient_clip_val, accumulate_grad_batches, cuda_graph, early_stopping, "
               "patience, steps_per_epoch, max_minutes, init_from, amsgrad, val_sets, val_t_points, "
               "select_on, val_sample_steps, optimizer_sharding, scheduler");
}

Test(config, wrong_types_say_what_was_expected)
{
    load_fails("training:\n  learning_rate: abc\n",
               "t.yaml:2:18: training.learning_rate: expected a number, got 'abc'; write a number like 1e-4");
    load_fails("training:\n  epochs: 1.5\n",
               "t.yaml:2:11: training.epochs: expected an integer, got '1.5'; write a whole number like 100");
    load_fails("masking:\n  enable: maybe\n",
               "t.yaml:2:11: masking.enable: expected true or false, got 'maybe'; write true or false");
    load_fails("training: 3\n",
               "t.yaml:1:11: training: expected a mapping, got '3'; write its keys indented below it");
    load_fails("TransformerLayer_setting:\n  dropout: 1.5\n",
               "t.yaml:2:12: TransformerLayer_setting.dropout: expected a value between 0 and 1, got '1.5'; "
               "the default is 0.1");
    load_fails("attention: [gated]\n", "t.yaml:1:12: attention: expected a plugin, got a list; write a plugin "
                                      "name, or {name: <plugin>, <option>: <value>, ...}");
    load_fails("ffn: {top_k: 1}\n", "t.yaml:1:6: ffn: the plugin's 'name' is missing; write a plugin name, or "
                                   "{name: <plugin>, <option>: <value>, ...}");
}

Test(config, enum_values_must_be_a_choice)
{
    load_fails("training_mode: jiont\n", "t.yaml:1:16: training_mode: expected one of joint, expr_to_pos, "
                                         "pos_to_expr, got 'jiont'; did you mean 'joint'?");
    load_fails("TransformerLayer_setting:\n  gate_type: all\n",
               "t.yaml:2:14: TransformerLayer_setting.gate_type: expected one of headwise, elementwise, none, "
               "got 'all'; use one of the listed values");
}

Test(config, duplicates_aliases_and_shapes_are_rejected)
{
    load_fails("training:\n  epochs: 5\n  epochs: 6\n",
               "t.yaml:3:3: training.epochs: duplicate key (first given at line 2, column 3); remove one of the two");
    load_fails("training:\n  epochs: &n 5\n  patience: *n\n",
               "t.yaml:3:13: training: YAML aliases (*n) are not supported; write the value out");
    load_fails("- a\n- b\n", "t.yaml:1:1: the config must be a mapping of keys; write 'key: value' lines");
    load_fails("training.epochs: 5\n", "t.yaml:1:1: training.epochs: a key cannot contain '.'; nest it as 'a:' "
                                       "then '  b: value' on the next line");
    load_fails("seed: {value: 1}\n---\nseed: {value: 2}\n",
               "t.yaml:2:1: a second YAML document (---); keep one document per config");
}

Test(config, missing_file_names_the_path)
{
    ast_error e = {{0}};
    cr_assert_null(ast_cfg_load_file("/nonexistent/run.yaml", &e));
    cr_assert_str_eq(e.msg, "/nonexistent/run.yaml: cannot open (No such file or directory); check "
                            "the path");
}

/* A FIFO named as the config (--config) blocked in open() for ever. */
Test(config, a_fifo_is_not_read, .timeout = 10)
{
    char dir[] = "/tmp/alphast-config-XXXXXX", fifo[64];
    cr_assert(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/run.yaml", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    ast_error e = {{0}};
    cr_assert_null(ast_cfg_load_file(fifo, &e));
    unlink(fifo), rmdir(dir);
    cr_assert(strstr(e.msg, "run.yaml: not a regular file (a FIFO)"), "%s", e.msg);
}

Test(config, model_errors_point_at_the_key)
{
    ast_cfg *cfg = load("attention: linear\nTransformerLayer_setting:\n  use_gated_attention: true\n");
    ast_model_config m;
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), -1);
    cr_assert_str_eq(e.msg, "t.yaml:1:12: attention: 'linear' disagrees with "
                            "TransformerLayer_setting.use_gated_attention: true at t.yaml:3:24; remove one of the two");
    ast_cfg_free(cfg);

    cfg = load("attention: {name: gated, gate_type: headwise}\nTransformerLayer_setting:\n  gate_type: none\n");
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), -1);
    cr_assert_str_eq(e.msg, "t.yaml:3:14: TransformerLayer_setting.gate_type: also given as attention.gate_type at "
                            "t.yaml:1:37; keep one of the two");
    ast_cfg_free(cfg);

    cfg = load("mlp_in_expression_setting:\n  mlp_out_expression_dims: 250\n");
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), -1);
    cr_assert_str_eq(e.msg, "t.yaml:2:28: TransformerLayer_setting.num_heads: 8 heads do not divide d_model 250 "
                            "(mlp_in_expression_setting.mlp_out_expression_dims); choose a divisor of d_model");
    ast_cfg_free(cfg);
}

/* ---- overrides ------------------------------------------------------------------ */

Test(config, overrides_set_values_and_create_maps)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\n");
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_override(cfg, "training.learning_rate=1e-3", &e), 0, "%s", e.msg);
    cr_assert_eq(ast_cfg_override(cfg, "training.epochs=7", &e), 0, "%s", e.msg);
    cr_assert_eq(ast_cfg_set(cfg, "training.scheduler.T_max", "50", &e), 0, "%s", e.msg);
    cr_assert_eq(ast_cfg_float(cfg, "training.learning_rate"), 1e-3);
    cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 7);
    cr_assert_eq(ast_cfg_int(cfg, "training.scheduler.T_max"), 50);
    cr_assert_str_eq(ast_cfg_get(cfg, "training.scheduler.T_max")->path, "training.scheduler.T_max");
    cr_assert_str_eq(ast_cfg_get(cfg, "training.scheduler.T_max")->where, "override:1:1");
    cr_assert_eq(ast_cfg_set(cfg, "ffn", "{name: moe, top_k: 1}", &e), 0, "%s", e.msg);
    ast_model_config m;
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), 0, "%s", e.msg);
    cr_assert_str_eq(m.ffn, "moe");
    assert_opt(m.ffn_opts, m.n_ffn_opts, "top_k", "1", "override:1:");
    ast_cfg_free(cfg);
}

Test(config, override_option_turns_a_plugin_name_into_a_map)
{
    ast_cfg *cfg = load("attention: gated\n");
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_override(cfg, "attention.gate_type=headwise", &e), 0, "%s", e.msg);
    ast_model_config m;
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), 0, "%s", e.msg);
    cr_assert_str_eq(m.attention, "gated");
    cr_assert_eq(m.n_attention_opts, 1);
    assert_opt(m.attention_opts, 1, "gate_type", "headwise", "override:1:21"); /* the value's column */
    cr_assert_str_eq(ast_cfg_get(cfg, "attention.name")->where, "t.yaml:1:12");
    ast_cfg_free(cfg);
}

static void override_fails(ast_cfg *cfg, const char *assignment, const char *expected)
{
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_override(cfg, assignment, &e), -1, "%s was accepted", assignment);
    cr_assert_str_eq(e.msg, expected);
}

Test(config, bad_overrides_leave_the_config_unchanged)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\n");
    /* columns are the override's: the key's level, the value's first character */
    override_fails(cfg, "training.lerning_rate=1",
                   "override:1:10: training.lerning_rate: unknown key; did you mean 'learning_rate'?");
    override_fails(cfg, "training.epochs=abc",
                   "override:1:17: training.epochs: expected an integer, got 'abc'; write a whole number like 100");
    override_fails(cfg, "training.epochs.x=1",
                   "override:1:17: training.epochs: has no keys below it; set it as a whole");
    override_fails(cfg, "training.scheduler.type=linear",
                   "override:1:25: training.scheduler.type: expected one of cosine, got 'linear'; use one of the "
                   "listed values");
    override_fails(cfg, "epochs", "override:1:7: epochs: no value; write KEY=VALUE to set a key, +KEY=VALUE to add "
                                  "one, ++KEY=VALUE to add or set it, ~KEY to delete it (e.g. training.epochs=10)");
    override_fails(cfg, "training.=1", "override:1:1: training.: not a key path; write names separated by '.'");
    override_fails(cfg, "training.epochs=[1", "override:2:1: training.epochs: YAML syntax error: did not find "
                                              "expected ',' or ']' while parsing a flow sequence; check the "
                                              "indentation, the ': ' after each key and the quotes");
    cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 5);
    cr_assert_null(ast_cfg_get(cfg, "training.scheduler"), "a failed override created no maps");
    ast_cfg_free(cfg);
}

/* ---- Hydra's override grammar (docs/config.md) --------------------------------- */

/* The override applies; the config's error otherwise. */
static void overrides(ast_cfg *cfg, const char *override)
{
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_override(cfg, override, &e), 0, "%s: %s", override, e.msg);
}

static const char *text_at(const ast_cfg *cfg, const char *path)
{
    const ast_cfg_node *n = ast_cfg_get(cfg, path);
    cr_assert(n && n->value, "%s is not set", path);
    return n->value;
}

Test(config, plus_adds_only_what_the_config_leaves_out)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\nattention: gated\ndata:\n  slice_key: null\n");
    overrides(cfg, "+training.patience=3");
    overrides(cfg, "+attention.gate_type=elementwise"); /* a plugin option */
    overrides(cfg, "+monitors=[grad_norm]");
    overrides(cfg, "+data.slice_key=section"); /* written as null counts as left out, as in Hydra */
    cr_assert_eq(ast_cfg_int(cfg, "training.patience"), 3);
    cr_assert_str_eq(text_at(cfg, "attention.gate_type"), "elementwise");
    cr_assert_str_eq(ast_cfg_str(cfg, "data.slice_key"), "section");
    override_fails(cfg, "+training.epochs=7",
                   "override:1:2: training.epochs: the config already sets it ('5', at t.yaml:2:11), and + only adds a "
                   "key the config leaves out; write training.epochs=VALUE or ++training.epochs=VALUE to change it");
    override_fails(cfg, "+monitors=[gate_activation]",
                   "override:1:2: monitors: the config already sets it (a list, at override:1:11), and + only adds a "
                   "key the config leaves out; write monitors=VALUE or ++monitors=VALUE to change it");
    override_fails(cfg, "+training.epoch=7", "override:1:11: training.epoch: unknown key; did you mean 'epochs'?");
    cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 5);
    ast_cfg_free(cfg);
}

Test(config, plus_plus_adds_or_sets)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\n");
    overrides(cfg, "++training.epochs=7");
    overrides(cfg, "++training.patience=3");
    cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 7);
    cr_assert_eq(ast_cfg_int(cfg, "training.patience"), 3);
    cr_assert_str_eq(ast_cfg_get(cfg, "training.epochs")->where, "override:1:19");
    override_fails(cfg, "++training.epochs=x",
                   "override:1:19: training.epochs: expected an integer, got 'x'; write a whole number like 100");
    ast_cfg_free(cfg);
}

Test(config, tilde_deletes_a_written_key_back_to_its_default)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\n  scheduler: {T_max: 9}\n"
                        "attention: {name: gated, gate_type: elementwise}\nmonitors: [grad_norm]\n");
    overrides(cfg, "~training.epochs");
    cr_assert_null(ast_cfg_get(cfg, "training.epochs"));
    cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 100);
    overrides(cfg, "~attention.gate_type");
    overrides(cfg, "~monitors");
    overrides(cfg, "~training.scheduler");
    cr_assert_null(ast_cfg_get(cfg, "training.scheduler"), "no scheduler: a constant rate again");
    cr_assert_null(ast_cfg_get(cfg, "monitors"));
    cr_assert_null(ast_cfg_get(cfg, "attention.gate_type"));
    cr_assert_str_eq(text_at(cfg, "attention.name"), "gated");
    override_fails(cfg, "~training.epochs", "override:1:2: training.epochs: the config does not set it, so there is "
                                            "nothing to delete (it is at its default, 100)");
    override_fails(cfg, "~attention.name", "override:1:2: attention.name: a plugin needs its name; delete the whole "
                                           "plugin (~attention) or name another one (attention.name=NAME)");
    override_fails(cfg, "~training.epoch", "override:1:11: training.epoch: unknown key; did you mean 'epochs'?");
    ast_cfg_free(cfg);
}

/* Found by fuzz_override: after `~ffn` an option made a plugin mapping
 * with no name, which the dumped config could not load again. */
Test(config, an_option_of_a_deleted_plugin_needs_its_name)
{
    ast_cfg *cfg = load("ffn: dense\n");
    overrides(cfg, "~ffn");
    override_fails(cfg, "ffn.top_k=1", "override:1:1: ffn.top_k: ffn names no plugin here; name it first (ffn=NAME, "
                                       "or ffn={name: NAME, top_k: ...})");
    cr_assert_null(ast_cfg_get(cfg, "ffn"));
    overrides(cfg, "ffn=moe");
    overrides(cfg, "ffn.top_k=1");
    cr_assert_str_eq(text_at(cfg, "ffn.name"), "moe");
    ast_cfg_free(cfg);
}

Test(config, tilde_with_a_value_deletes_only_that_value)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\n  learning_rate: 1e-3\n  amsgrad: yes\n"
                        "data:\n  loading: {rotation: false}\n");
    overrides(cfg, "~training.learning_rate=0.001"); /* the same number */
    overrides(cfg, "~training.amsgrad=true");        /* yes is true */
    overrides(cfg, "~data.loading={rotation:false}"); /* mappings compare key by key */
    cr_assert_null(ast_cfg_get(cfg, "training.learning_rate"));
    cr_assert_null(ast_cfg_get(cfg, "training.amsgrad"));
    cr_assert_null(ast_cfg_get(cfg, "data.loading"));
    override_fails(cfg, "~training.epochs=6", "override:1:2: training.epochs: holds '5' (at t.yaml:2:11), not '6', so "
                                              "it stays; write ~training.epochs to delete it whatever it holds");
    cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 5);
    ast_cfg_free(cfg);
}

Test(config, a_mapping_merges_into_the_mapping_there)
{
    ast_cfg *cfg = load("data:\n  loading: {rotation: true, expression_dropout: 0.2}\n"
                        "ffn: {name: moe, top_k: 2}\nattention: gated\n");
    overrides(cfg, "data.loading={rotation: false}");
    cr_assert_eq(ast_cfg_bool(cfg, "data.loading.rotation"), 0);
    cr_assert_float_eq(ast_cfg_float(cfg, "data.loading.expression_dropout"), 0.2, 0, "kept, not reset to 0.1");
    overrides(cfg, "data={loading: {num_workers: 0}, set_size: 8}"); /* merges at every level */
    cr_assert_float_eq(ast_cfg_float(cfg, "data.loading.expression_dropout"), 0.2, 0);
    cr_assert_eq(ast_cfg_int(cfg, "data.loading.num_workers"), 0);
    cr_assert_eq(ast_cfg_int(cfg, "data.set_size"), 8);
    overrides(cfg, "ffn={num_experts: 8}"); /* options join the plugin's */
    cr_assert_str_eq(text_at(cfg, "ffn.top_k"), "2");
    cr_assert_str_eq(text_at(cfg, "ffn.num_experts"), "8");
    overrides(cfg, "attention={gate_type: elementwise}"); /* a plugin given by name merges as {name: gated} */
    cr_assert_str_eq(text_at(cfg, "attention.name"), "gated");
    cr_assert_str_eq(text_at(cfg, "attention.gate_type"), "elementwise");
    overrides(cfg, "ffn={name: dense}"); /* another plugin: the options were moe's */
    cr_assert_null(ast_cfg_get(cfg, "ffn.top_k"));
    override_fails(cfg, "data.loading={rotation: maybe}",
                   "override:1:25: data.loading.rotation: expected true or false, got 'maybe'; write true or false");
    cr_assert_eq(ast_cfg_bool(cfg, "data.loading.rotation"), 0, "a failed merge changes nothing");
    overrides(cfg, "~data.loading"); /* to replace a mapping: delete it, then add the new one */
    overrides(cfg, "+data.loading={rotation: false}");
    cr_assert_float_eq(ast_cfg_float(cfg, "data.loading.expression_dropout"), 0.1, 0);
    ast_cfg_free(cfg);
}

Test(config, hydra_mappings_need_no_space_after_the_colon)
{
    ast_cfg *cfg = load("data:\n  loading: {expression_dropout: 0.2}\n");
    overrides(cfg, "data.loading={rotation:false,expression_dropout:0.3}");
    cr_assert_eq(ast_cfg_bool(cfg, "data.loading.rotation"), 0);
    cr_assert_float_eq(ast_cfg_float(cfg, "data.loading.expression_dropout"), 0.3, 0);
    overrides(cfg, "ffn={name:moe,top_k:1}");
    cr_assert_str_eq(text_at(cfg, "ffn.top_k"), "1");
    cr_assert_str_eq(ast_cfg_get(cfg, "ffn.top_k")->where, "override:1:21", "the user's column, not the YAML's");
    /* only the key's ':' is Hydra's; a value keeps its own, and quotes keep commas */
    overrides(cfg, "data={path:/tmp/a:b.h5ad,preprocessing:{position_key:'x,y'}}");
    cr_assert_str_eq(ast_cfg_str(cfg, "data.path"), "/tmp/a:b.h5ad");
    cr_assert_str_eq(ast_cfg_str(cfg, "data.preprocessing.position_key"), "x,y");
    override_fails(cfg, "data.loading={rotation:false,expression_dropout:2}",
                   "override:1:49: data.loading.expression_dropout: expected a value between 0 and 1, got '2'; the "
                   "default is 0.1");
    ast_cfg_free(cfg);
}

Test(config, a_sweep_is_not_an_override)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\n");
    override_fails(cfg, "training.epochs=1,2",
                   "override:1:17: training.epochs: '1,2' is a sweep (several values), which runs with `alphast-run "
                   "sweep -m` or alphast.grid (docs/config.md); for one value, quote it or write a list in brackets");
    override_fails(cfg, "training.epochs=range(1,3)",
                   "override:1:17: training.epochs: 'range(1,3)' is a sweep (several values), which runs with "
                   "`alphast-run sweep -m` or alphast.grid (docs/config.md); for one value, quote it or write a list "
                   "in brackets");
    override_fails(cfg, "+training.patience=choice(1,2)",
                   "override:1:20: training.patience: 'choice(1,2)' is a sweep (several values), which runs with "
                   "`alphast-run sweep -m` or alphast.grid (docs/config.md); for one value, quote it or write a list "
                   "in brackets");
    overrides(cfg, "data.slice_key='a,b'");
    overrides(cfg, "monitors=[grad_norm, {name: expert_load, every: 2}]");
    cr_assert_str_eq(ast_cfg_str(cfg, "data.slice_key"), "a,b");
    cr_assert_eq(ast_cfg_get(cfg, "monitors")->n_items, 2);
    ast_cfg_free(cfg);
}

static void assert_sweep(const char *override, const char *key, int n, const char *const *values)
{
    ast_cfg_sweep s;
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_sweep_parse(override, &s, &e), 0, "%s: %s", override, e.msg);
    cr_assert_str_eq(s.key, key);
    cr_assert_eq(s.n, n, "%s: %d values", override, s.n);
    for (int i = 0; i < n; i++) cr_assert_str_eq(s.values[i], values[i], "%s: value %d", override, i);
    ast_cfg_sweep_free(&s);
}

static void sweep_fails(const char *override, const char *expected)
{
    ast_cfg_sweep s;
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_sweep_parse(override, &s, &e), -1, "%s was accepted", override);
    cr_assert_str_eq(e.msg, expected);
}

Test(config, sweep_overrides_split_into_values)
{
    assert_sweep("attention=linear, gated", "attention", 2, (const char *const[]){"linear", "gated"});
    assert_sweep("ffn={name: moe, top_k: 1},dense", "ffn", 2, (const char *const[]){"{name: moe, top_k: 1}", "dense"});
    assert_sweep("data.slice_key='a,b',c", "data.slice_key", 2, (const char *const[]){"'a,b'", "c"});
    assert_sweep("training.epochs=range(1,4)", "training.epochs", 3, (const char *const[]){"1", "2", "3"});
    assert_sweep("training.epochs=range(3)", "training.epochs", 3, (const char *const[]){"0", "1", "2"});
    assert_sweep("training.epochs=range(10, 0, -4)", "training.epochs", 3, (const char *const[]){"10", "6", "2"});
    assert_sweep("training.learning_rate=range(0,1,0.25)", "training.learning_rate", 4,
                 (const char *const[]){"0", "0.25", "0.5", "0.75"});
    assert_sweep("+monitors=choice([grad_norm], [expert_load, grad_norm])", "+monitors", 2,
                 (const char *const[]){"[grad_norm]", "[expert_load, grad_norm]"});
    assert_sweep("training.epochs=5", "training.epochs", 1, (const char *const[]){"5"});
    assert_sweep("~monitors", "~monitors", 0, NULL);
    sweep_fails("training.epochs=1,,2",
                "override:1:17: training.epochs: an empty value in the sweep '1,,2'; remove the extra ','");
    sweep_fails("training.epochs=range(2,2)", "override:1:17: training.epochs: range(2,2) gives no values or more "
                                              "than 100000; check START, STOP and STEP");
    sweep_fails("training.epochs=range(1,x)", "override:1:17: training.epochs: range(): 'x' is not a number");
    sweep_fails("training.epochs=range(1,2,3,4)",
                "override:1:17: training.epochs: range(1,2,3,4) takes 1 to 3 numbers: range(STOP), range(START, "
                "STOP) or range(START, STOP, STEP)");
    sweep_fails("attention", "override:1:1: 'attention' is not a sweep; write KEY=V1,V2,... (e.g. "
                             "attention=linear,gated), KEY=range(1,4) or KEY=choice(a,b)");
}

/* Hydra refuses a nested sweep; splitting it at its commas made values of
 * "choice(2" and "3)". */
Test(config, a_sweep_inside_a_sweep_is_an_error_at_its_column)
{
    sweep_fails("training.epochs=choice(1,choice(2,3))",
                "override:1:26: training.epochs: a sweep inside a sweep ('choice(2,3)'): sweeps do not nest; list "
                "every value in one sweep (KEY=a,b,c or KEY=choice(a,b,c))");
    sweep_fails("training.epochs=1, choice(2,3)",
                "override:1:20: training.epochs: a sweep inside a sweep ('choice(2,3)'): sweeps do not nest; list "
                "every value in one sweep (KEY=a,b,c or KEY=choice(a,b,c))");
    sweep_fails("training.epochs=range(1,range(2,3))",
                "override:1:25: training.epochs: a sweep inside a sweep ('range(2,3)'): sweeps do not nest; list "
                "every value in one sweep (KEY=a,b,c or KEY=choice(a,b,c))");
    assert_sweep("data.slice_key=choice('choice(a,b)',c)", "data.slice_key", 2,
                 (const char *const[]){"'choice(a,b)'", "c"});
}

/* Doubles have 53 bits: counted in them, this range printed
 * 9223372036854774784, a number no one wrote. */
Test(config, an_integer_range_counts_in_integers)
{
    assert_sweep("seed.value=range(9223372036854775000,9223372036854775807,200)", "seed.value", 5,
                 (const char *const[]){"9223372036854775000", "9223372036854775200", "9223372036854775400",
                                       "9223372036854775600", "9223372036854775800"});
    assert_sweep("seed.value=range(-9223372036854775808,-9223372036854775806)", "seed.value", 2,
                 (const char *const[]){"-9223372036854775808", "-9223372036854775807"});
    assert_sweep("seed.value=range(9223372036854775807,-9223372036854775808,-9223372036854775808)", "seed.value", 2,
                 (const char *const[]){"9223372036854775807", "-1"});
    sweep_fails("seed.value=range(-9223372036854775808,9223372036854775807)",
                "override:1:12: seed.value: range(-9223372036854775808,9223372036854775807) gives no values or more "
                "than 100000; check START, STOP and STEP");
    sweep_fails("seed.value=range(1,5,0)",
                "override:1:12: seed.value: range(1,5,0) gives no values or more than 100000; check START, STOP and "
                "STEP");
}

/* KEY= is YAML's empty value, null (it read as an empty mapping), and a
 * Hydra mapping nested past the limit says so (libyaml stopped first). */
Test(config, an_empty_value_is_null_and_deep_hydra_mappings_name_the_limit)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\ndata:\n  cache_dir: cache\n");
    override_fails(cfg, "training.epochs=",
                   "override:1:17: training.epochs: expected an integer, got nothing (null); write a whole number "
                   "like 100");
    overrides(cfg, "data.cache_dir=");
    cr_assert_eq(ast_cfg_get(cfg, "data.cache_dir")->kind, AST_CFG_NULL);
    char value[400] = "data.loading=";
    for (int i = 0; i < 100; i++) strcat(value, "{a:");
    /* data.loading sits at level 2: its value may open 62 more; the 63rd '{' is column 14 + 62 x 3 */
    override_fails(cfg, value, "override:1:200: nesting deeper than 64 levels; a config needs a few levels (plugin "
                               "options one or two more): check for unclosed brackets or flatten the value");
    ast_cfg_free(cfg);
}

/* The reference's file loads and asks for bf16 mixed precision, which
 * alphast has (whether this machine runs it is train's to say); float16
 * it has not: a run refuses that, as it does wandb and several processes,
 * and takes the defaults (tensorboard, one process). */
Test(config, keys_accepted_but_not_implemented_stop_a_run)
{
    ast_cfg *cfg = load_reference();
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_check_supported(cfg, &e), 0, "%s", e.msg);
    overrides(cfg, "training.precision=16-mixed");
    cr_assert_eq(ast_cfg_check_supported(cfg, &e), -1, "16-mixed was accepted");
    cr_assert_str_eq(e.msg, "override:1:20: training.precision: '16-mixed' is not supported: alphast computes in "
                            "float32, or with bf16 GEMMs (bf16-mixed) or a GPU's TF32 GEMMs (tf32); it has no float16 "
                            "mode: write training.precision: 32-true, bf16-mixed, tf32 or leave it out");
    overrides(cfg, "training.precision=32");
    cr_assert_eq(ast_cfg_check_supported(cfg, &e), 0, "%s", e.msg);
    overrides(cfg, "logging.logger=wandb");
    cr_assert_eq(ast_cfg_check_supported(cfg, &e), -1);
    cr_assert_str_eq(e.msg, "override:1:16: logging.logger: 'wandb' is not supported: alphast logs to TensorBoard, "
                            "not to Weights & Biases: write logging.logger: tensorboard (the default) or none");
    overrides(cfg, "logging.logger=none");
    cr_assert_eq(ast_cfg_check_supported(cfg, &e), 0, "%s", e.msg);
    overrides(cfg, "~logging.logger");
    overrides(cfg, "distributed.enabled=no"); /* false: the default */
    cr_assert_eq(ast_cfg_check_supported(cfg, &e), 0, "%s", e.msg);
    overrides(cfg, "distributed.devices=[0, 1]");
    cr_assert_eq(ast_cfg_check_supported(cfg, &e), -1);
    cr_assert_str_eq(e.msg, "override:1:21: distributed.devices: a list is not supported: alphast does not read "
                            "Lightning's distributed settings: one run over several processes is mpirun -np R "
                            "alphast-run train (built --with-mpi, docs/cluster.md); leave distributed.* at its "
                            "defaults or out");
    overrides(cfg, "~distributed");
    overrides(cfg, "logging.log_every_n_steps=1");
    cr_assert_eq(ast_cfg_check_supported(cfg, &e), -1);
    cr_assert(strstr(e.msg, "logging.log_every_n_steps: '1' is not supported: alphast logs every step"), "%s", e.msg);
    ast_cfg_free(cfg);
}

/* ---- dump -------------------------------------------------------------------- */

static char *dump_to_string(const ast_cfg *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_dump(cfg, f, &e), 0, "%s", e.msg);
    fclose(f);
    return text;
}

Test(config, dump_and_reload_keeps_every_value)
{
    ast_cfg *cfg = load_reference();
    ast_error e = {{0}};
    const char *overrides[] = {"training.learning_rate=3e-4", "logging.wandb_project='null'",
                               "TransformerLayer_setting.use_moe=on", "ffn={name: moe, capacity_factor: 2.0}",
                               "monitors=[grad_norm, {name: x, every: 5}]",
                               "data.raw_data_dir='a: b'"};
    for (size_t i = 0; i < sizeof overrides / sizeof *overrides; i++)
        cr_assert_eq(ast_cfg_override(cfg, overrides[i], &e), 0, "%s: %s", overrides[i], e.msg);
    char *text = dump_to_string(cfg);
    ast_cfg *again = ast_cfg_load_string(text, "dumped.yaml", &e);
    cr_assert(again, "%s\n%s", e.msg, text);

    cr_assert_eq(ast_cfg_float(again, "training.learning_rate"), 3e-4);
    cr_assert_eq(ast_cfg_float(again, "training.weight_decay"), 1e-5);
    cr_assert_str_eq(ast_cfg_str(again, "logging.wandb_project"), "null", "a quoted 'null' stays a string");
    cr_assert_null(ast_cfg_str(again, "data.preprocessing.gene_list_file"));
    cr_assert_str_eq(ast_cfg_str(again, "data.raw_data_dir"), "a: b");
    cr_assert_eq(ast_cfg_get(again, "monitors")->n_items, 2);
    ast_model_config a, b;
    cr_assert_eq(ast_cfg_model(cfg, 50, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(ast_cfg_model(again, 50, &b, &e), 0, "%s", e.msg);
    cr_assert_eq(memcmp(&a, &b, offsetof(ast_model_config, attention)), 0, "sizes differ after reload");
    cr_assert_str_eq(a.attention, b.attention);
    cr_assert_str_eq(a.ffn, b.ffn);
    cr_assert_eq(a.n_attention_opts, b.n_attention_opts);
    for (int i = 0; i < a.n_attention_opts; i++)
        assert_opt(b.attention_opts, b.n_attention_opts, a.attention_opts[i].key, a.attention_opts[i].value, NULL);
    cr_assert_eq(a.n_ffn_opts, 4, "capacity_factor and the three written MoE switch keys");
    cr_assert_eq(b.n_ffn_opts, 4);
    for (int i = 0; i < a.n_ffn_opts; i++)
        assert_opt(b.ffn_opts, b.n_ffn_opts, a.ffn_opts[i].key, a.ffn_opts[i].value, NULL);

    char *text2 = dump_to_string(again);
    cr_assert_str_eq(text2, text, "dumping the reloaded config changes nothing");
    free(text2);
    free(text);
    ast_cfg_free(again);
    ast_cfg_free(cfg);
}

/* ---- hostile input: depth, encodings, the dumper --------------------------------- */

static char *data_path(const char *name, char *buf, size_t size)
{
    const char *dir = getenv("ALPHAST_TEST_DATA");
    cr_assert(dir, "ALPHAST_TEST_DATA is not set");
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

/* "a: " and `depth` - 1 nested flow sequences: the root mapping is level 1. */
static char *nested(int depth)
{
    char *text = malloc((size_t)depth * 2 + 16);
    int n = sprintf(text, "a: ");
    for (int i = 1; i < depth; i++) text[n++] = '[';
    for (int i = 1; i < depth; i++) text[n++] = ']';
    strcpy(text + n, "\n");
    return text;
}

Test(config, nesting_30000_deep_is_a_located_error_not_a_stack_overflow)
{
    char path[1024];
    ast_error e = {{0}};
    cr_assert_null(ast_cfg_load_file(data_path("config_bad/deep_nesting_30000.yaml", path, sizeof path), &e));
    cr_assert(strstr(e.msg, "deep_nesting_30000.yaml:1:67: nesting deeper than 64 levels; "), "%s", e.msg);

    char *ok = nested(AST_CFG_MAX_DEPTH), *deep = nested(AST_CFG_MAX_DEPTH + 1);
    cr_assert_null(ast_cfg_load_string(ok, "t.yaml", &e));
    cr_assert(strstr(e.msg, "t.yaml:1:1: a: unknown key;"), "parsed: the limit itself is allowed; %s", e.msg);
    cr_assert_null(ast_cfg_load_string(deep, "t.yaml", &e));
    cr_assert_str_eq(e.msg, "t.yaml:1:67: nesting deeper than 64 levels; a config needs a few levels (plugin "
                            "options one or two more): check for unclosed brackets or flatten the value");
    free(ok), free(deep);
}

Test(config, a_deep_override_counts_its_key_path_and_leaves_the_config_alone)
{
    ast_cfg *cfg = load("training:\n  epochs: 5\n");
    char *value = malloc(70000);
    strcpy(value, "training.scheduler=");
    size_t n = strlen(value);
    for (int i = 0; i < 30000; i++) value[n++] = '[';
    value[n] = '\0';
    ast_error e = {{0}};
    cr_assert_eq(ast_cfg_override(cfg, value, &e), -1);
    /* training.scheduler sits at level 3: its value may open 61 more; the 63rd '[' is column 19 + 63 */
    cr_assert(strstr(e.msg, "override:1:82: nesting deeper than 64 levels; "), "%s", e.msg);
    cr_assert_null(ast_cfg_get(cfg, "training.scheduler"));
    free(value);
    ast_cfg_free(cfg);
}

Test(config, text_that_is_not_utf8_is_located_in_files_values_and_key_paths)
{
    char path[1024];
    ast_error e = {{0}};
    cr_assert_null(ast_cfg_load_file(data_path("config_bad/nonutf8_key.yaml", path, sizeof path), &e));
    cr_assert(strstr(e.msg, "nonutf8_key.yaml:3:4: invalid leading UTF-8 octet (byte 0x93 at byte 25); the text is "
                            "not valid UTF-8: save the file as UTF-8"), "%s", e.msg);
    load_fails("training:\n  epochs: \"\a\"\n", "t.yaml:2:12: control characters are not allowed (character 0x07 "
                                               "at byte 21); remove the character or write it as an escape in a "
                                               "double-quoted string");
    ast_cfg *cfg = load("attention: gated\n");
    override_fails(cfg, "attention.gate_type=head\x93wise",
                   "override:1:25: attention.gate_type: invalid leading UTF-8 octet (byte 0x93 at byte 4); the value "
                   "is not valid UTF-8: write it in UTF-8");
    override_fails(cfg, "attention.x\x93\xa0y=1",
                   "override:1:12: attention.x\\x93\\xa0y: the key path is not valid UTF-8 text (byte 0x93 at "
                   "column 12); write key names in UTF-8 without control characters");
    override_fails(cfg, "attention.a\tb=1",
                   "override:1:12: attention.a\\x09b: the key path is not valid UTF-8 text (control character 0x09 "
                   "at column 12); write key names in UTF-8 without control characters");
    ast_cfg_free(cfg);
}

/* The reproducer's overrides (a fuzzer's find): each one fails cleanly or
 * applies, and the config dumps afterwards. */
Test(config, the_non_utf8_override_reproducer_leaves_a_dumpable_config)
{
    char path[1024], line[256];
    FILE *f = fopen(data_path("config_bad/override_nonutf8_key.txt", path, sizeof path), "r");
    cr_assert(f, "%s", path);
    ast_cfg *cfg = load_reference();
    int refused = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        ast_error e = {{0}};
        if (ast_cfg_override(cfg, line, &e) < 0) refused++;
    }
    fclose(f);
    cr_assert_eq(refused, 2);
    ast_error e = {{0}};
    char *text = ast_cfg_dump_string(cfg, &e);
    cr_assert(text, "%s", e.msg);
    free(text);
    ast_cfg_free(cfg);
}

/* Loading and overrides refuse such text first; a tree built any other way
 * (here through the internal tree API) must still dump safely: libyaml
 * refuses the scalar, and the refused event used to be emitted again and
 * its strings freed twice. */
Test(config, the_dumper_refuses_text_that_is_not_utf8_without_freeing_twice)
{
    ast_cfg *cfg = load("attention: {name: gated}\ntraining:\n  epochs: 5\n");
    ast_cfg_node *map = (ast_cfg_node *)ast_cfg_get(cfg, "attention");
    ast_cfg_node *v = cfg_node_new(AST_CFG_SCALAR, "t.yaml", 7, 9);
    v->value = strdup("1");
    cfg_node_attach(map, "x\x93\xa0y", v);
    ast_error e = {{0}};
    cr_assert_null(ast_cfg_dump_string(cfg, &e));
    cr_assert_str_eq(e.msg, "t.yaml:7:9: attention.x\\x93\\xa0y: the key is not valid UTF-8 text, so the config "
                            "cannot be written; write keys and values in UTF-8");
    cfg_node_detach(v);
    cfg_node_free(v);

    ast_cfg_node *epochs = (ast_cfg_node *)ast_cfg_get(cfg, "training.epochs");
    free((char *)epochs->value);
    epochs->value = strdup("5\xff");
    cr_assert_null(ast_cfg_dump_string(cfg, &e));
    cr_assert_str_eq(e.msg, "t.yaml:3:11: training.epochs: the value is not valid UTF-8 text, so the config cannot "
                            "be written; write keys and values in UTF-8");
    ast_cfg_free(cfg);
}

Test(config, text_checks_accept_utf8_and_refuse_the_rest)
{
    static const char good[] = "attention.gate_type \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    cr_assert_eq(ast_cfg_bad_text(good, strlen(good)), -1);
    cr_assert_eq(ast_cfg_bad_text("ab\x80", 3), 2, "a lone continuation byte");
    cr_assert_eq(ast_cfg_bad_text("\xc0\xaf", 2), 0, "an overlong '/'");
    cr_assert_eq(ast_cfg_bad_text("\xed\xa0\x80", 3), 0, "a surrogate");
    cr_assert_eq(ast_cfg_bad_text("\xf4\x90\x80\x80", 4), 0, "past U+10FFFF");
    cr_assert_eq(ast_cfg_bad_text("ab\xe2\x82", 4), 2, "cut short");
    cr_assert_eq(ast_cfg_bad_text("a\0b", 3), 1, "NUL is a control character");
    char out[16];
    ast_cfg_escape("\xc3\xa9\x01x\xff", out, sizeof out);
    cr_assert_str_eq(out, "\xc3\xa9\\x01x\\xff");
    ast_cfg_escape("abcdefghijklmnopqrstuvwxyz", out, sizeof out);
    cr_assert_str_eq(out, "abcdefghijkl...");
}

/* The structural prior (docs/model.md §2.12) needs clean expression and,
 * as a residual, an x0 output: each refusal names the key and the fix. */
Test(config, prior_errors_name_the_key_and_the_fix)
{
    ast_model_config m;
    ast_error e = {{0}};
    ast_cfg *cfg = load("model: {prior: isomap}\n");
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), -1);
    cr_assert(strstr(e.msg, "t.yaml:1:16: model.prior:") && strstr(e.msg, "training_mode: expr_to_pos"), "%s", e.msg);
    ast_cfg_free(cfg);

    cfg = load("training_mode: expr_to_pos\ndiffusion: {position_parameterisation: v}\nmodel: {prior: mds}\n");
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), -1);
    cr_assert(strstr(e.msg, "model.prior_residual: false"), "%s", e.msg);
    ast_cfg_free(cfg);

    cfg = load("training_mode: expr_to_pos\ndiffusion: {position_parameterisation: v}\n"
               "model: {prior: mds, prior_residual: false, prior_inputs: true, prior_dims: 2}\n");
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), 0, "%s", e.msg);
    cr_assert(m.prior.kind == AST_PRIOR_MDS && m.prior.dims == 2 && m.prior.k == 10 && m.prior_inputs && !m.prior_residual);
    ast_cfg_free(cfg);

    cfg = load("training_mode: expr_to_pos\nmodel: {prior: isomap, prior_dims: 4}\n");
    cr_assert_eq(ast_cfg_model(cfg, 10, &m, &e), -1);
    cr_assert(strstr(e.msg, "model.prior_dims") && strstr(e.msg, "use 1..3"), "%s", e.msg);
    ast_cfg_free(cfg);
}
