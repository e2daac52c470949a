/* A plugin built outside the alphast build, as its author would: compiler
 * flags from `pkg-config --cflags alphast-plugin` (the uninstalled .pc in
 * the build tree), then loaded by name through ALPHAST_PLUGIN_PATH. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/loader.h"

static char dir[] = "/tmp/alphast-oot-XXXXXX";
static char so[sizeof dir + 32];

static void make_dir(void)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(so, sizeof so, "%s/attn_fixture.so", dir);
}

static void remove_dir(void)
{
    remove(so);
    rmdir(dir);
}

TestSuite(out_of_tree, .init = make_dir, .fini = remove_dir);

/* The output of a shell command, trailing newline removed. */
static void capture(const char *cmd, char *out, size_t n)
{
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    out[strcspn(out, "\n")] = '\0';
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);
}

Test(out_of_tree, build_with_pkg_config_and_load_by_name)
{
    char cflags[1024], cmd[4096];
    capture("PKG_CONFIG_PATH=" ALPHAST_BUILD_DIR " " AST_TEST_PKG_CONFIG " --cflags alphast-plugin", cflags, sizeof cflags);
    cr_assert(strstr(cflags, "-I" ALPHAST_SOURCE_DIR "/include"), "cflags: %s", cflags);
    snprintf(cmd, sizeof cmd, "%s -std=c11 -Wall -Werror -shared -fPIC %s %s/tests/plugins/attn_fixture.c -o %s",
             AST_TEST_CC, cflags, ALPHAST_SOURCE_DIR, so);
    cr_assert_eq(system(cmd), 0, "%s", cmd);

    ast_error e = {{0}};
    setenv("ALPHAST_PLUGIN_PATH", dir, 1);
    cr_assert(ast_plugins_init(&e), "%s", e.msg);
    const ast_plugin *p = ast_plugin_load(AST_KIND_ATTENTION, "fixture", &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_assert_str_eq(ast_plugin_path(p), so, "the directory in ALPHAST_PLUGIN_PATH comes first");
    const ast_plugin_desc *d = ast_plugin_desc_of(p);
    cr_assert_eq(d->kind, AST_KIND_ATTENTION);
    cr_assert_str_eq(d->version, "1.2.3");
    cr_assert_eq(d->n_options, 6);
    cr_assert_str_eq(d->options[2].name, "learning_rate");
    cr_assert_not_null(d->forward);
    ast_plugins_shutdown();
}
