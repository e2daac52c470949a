/* The plugin ABI over time: a plugin built against an older header of the
 * same major (tests/plugins/abi-2.0, kept frozen) loads and calls the right
 * functions in this host; the op list only grew at its tail since, and
 * the host table's later members (2.3's read and write) do their job. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/loader.h"
#include "test_files.h"

#define FIXTURES ALPHAST_BUILD_DIR "/tests/plugins"

static void use_fixtures(void)
{
    ast_error e = {{0}};
    setenv("ALPHAST_PLUGIN_PATH", FIXTURES, 1);
    cr_assert(ast_plugins_init(&e), "%s", e.msg);
}

TestSuite(abi, .init = use_fixtures, .fini = ast_plugins_shutdown);

Test(abi, an_older_minor_plugin_calls_the_right_functions)
{
    ast_error e = {{0}};
    const ast_plugin *p = ast_plugin_load(AST_KIND_ATTENTION, "abi20", &e);
    cr_assert_not_null(p, "%s", e.msg);
    const ast_plugin_desc *d = ast_plugin_desc_of(p);
    cr_assert_eq(d->abi_major, AST_ABI_MAJOR);
    cr_assert_eq(d->abi_minor, 0);

    void *self = d->create(&(ast_create_args){.host = ast_host_table(), .backend = "cpu"}, e.msg, sizeof e.msg);
    cr_assert_not_null(self, "%s", e.msg);
    ast_ctx *c = ast_ctx_new(1);
    ast_ctx_set_scheduled(c, "abi.shift", 0.5f);
    const float xs[6] = {-1.5f, -0.5f, 0.0f, 0.25f, 1.0f, 2.0f};
    ast_tensor *x = ast_tensor_from(c, 3, (int64_t[]){1, 2, 3}, xs);
    ast_tensor *y = d->forward(self, c, x, &(ast_fwd_args){.layer = 3});

    /* Exact in float: 2x + 1.5 and x*x are representable for these x. */
    double sq = 0, sum = 0;
    for (int i = 0; i < 6; i++) {
        float want = (2.0f * xs[i] + 1.5f) + xs[i] * xs[i];
        cr_assert_eq(y->data[i], want, "y[%d] = %g, want %g", i, y->data[i], want);
        sq += (double)(xs[i] - want) * (xs[i] - want), sum += want;
    }
    cr_assert_eq(ast_ctx_n_losses(c), 1);
    cr_assert_str_eq(ast_ctx_loss_name(c, 0), "abi20");
    cr_assert_float_eq(ast_ctx_loss(c, 0)->data[0], sq / 6, 1e-5 * sq / 6);
    cr_assert_eq(ast_ctx_n_stats(c), 1);
    const ast_stat *s = ast_ctx_stats(c);
    cr_assert_str_eq(s->name, "abi20.mean");
    cr_assert_eq(s->layer, 3);
    cr_assert_float_eq(s->values[0], sum / 6, 1e-6 * fabs(sum / 6));
    ast_plugin_destroy(d, self);
    ast_ctx_free(c);
}

/* The AST_OP lines of a file, in order. */
static int op_lines(const char *path, char lines[][256], int max)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    int n = 0;
    char buf[512];
    while (n < max && fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        if (!strncmp(buf, "AST_OP(", 7)) snprintf(lines[n++], 256, "%s", buf);
    }
    fclose(f);
    return n;
}

Test(abi, ops_def_only_grew_at_its_tail_since_2_0)
{
    static char old[128][256], now[128][256];
    int n_old = op_lines(ALPHAST_SOURCE_DIR "/tests/plugins/abi-2.0/alphast/ops.def", old, 128);
    int n_now = op_lines(ALPHAST_SOURCE_DIR "/include/alphast/ops.def", now, 128);
    cr_assert_geq(n_now, n_old);
    for (int i = 0; i < n_old; i++) cr_assert_str_eq(now[i], old[i], "ops.def line %d changed since ABI 2.0", i);
    cr_assert_eq(ast_host_table()->ops->n_ops, (uint32_t)n_now, "the host's op table has %u slots, ops.def %d",
                 ast_host_table()->ops->n_ops, n_now);
}

/* ABI 2.3 appended read and write to the host table: copies of part of a
 * tensor's data to and from host memory (memcpy on the CPU backend). */
Test(abi, the_host_table_reads_and_writes_tensor_data)
{
    const ast_host *h = ast_host_table();
    cr_assert_geq(h->abi_minor, 3);
    ast_ctx *c = ast_ctx_new(1);
    ast_tensor *t = h->ops->zeros(c, 2, (int64_t[]){2, 3});
    const float in[3] = {1.5f, -2.0f, 0.25f};
    h->write(c, t, 2, 3, in);
    float out[6];
    h->read(c, t, 0, 6, out);
    const float want[6] = {0.0f, 0.0f, 1.5f, -2.0f, 0.25f, 0.0f};
    cr_assert_arr_eq(out, want, sizeof want);
    ast_ctx_free(c);
}

/* The README states the ABI plugin.h defines: "ABI (M.m)" and "(ABI M.m)"
 * said 2.3 after 2.4 had appended rng_key and stats_wanted. */
Test(abi, the_readme_states_the_current_abi)
{
    char *text = test_read_file(ALPHAST_SOURCE_DIR "/README.md");
    static const char *const marks[] = {"ABI (", "(ABI "};
    int seen = 0;
    for (int m = 0; m < 2; m++)
        for (const char *at = strstr(text, marks[m]); at; at = strstr(at + 1, marks[m])) {
            unsigned major, minor;
            cr_assert_eq(sscanf(at + strlen(marks[m]), "%u.%u", &major, &minor), 2, "%.40s", at);
            cr_assert(major == AST_ABI_MAJOR && minor == AST_ABI_MINOR, "README.md says %.40s; plugin.h defines %d.%d",
                      at, AST_ABI_MAJOR, AST_ABI_MINOR);
            seen++;
        }
    cr_assert_geq(seen, 2);
    free(text);
}
