/* Plugins that go wrong, seen by a user of alphast-run: a plugin that
 * crashes or calls exit() inside forward is named in one line on stderr; a
 * file that is not a shared object gets the loader's real reason; a plugin
 * directory or file others can write, or a relative path entry, is skipped
 * with a warning; a plugin on the path that replaces a built-in one is
 * named. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIXTURES ALPHAST_BUILD_DIR "/tests/plugins"
#define TINY ALPHAST_SOURCE_DIR "/tests/data/faults/tiny.yaml"
#define DATA ALPHAST_SOURCE_DIR "/data/starmap3d/starmap3d.h5ad"

typedef struct outcome {
    int status; /* as waitpid gives it */
    char err[8192];
} outcome;

/* alphast-run with `env` and `args`, stderr kept. */
static outcome *run(const char *env, const char *args)
{
    static outcome o;
    char cmd[2048], err[] = "/tmp/alphast-fault-XXXXXX", dir[] = "/tmp/alphast-fault-run-XXXXXX";
    close(mkstemp(err));
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cd %s && %s %s/alphast-run %s 2>%s >/dev/null", dir, env, ALPHAST_BUILD_DIR, args, err);
    o.status = system(cmd);
    FILE *f = fopen(err, "r");
    size_t got = f ? fread(o.err, 1, sizeof o.err - 1, f) : 0;
    o.err[got] = '\0';
    if (f) fclose(f);
    remove(err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    return &o;
}

#define TRAIN_EVIL "ALPHAST_PLUGIN_PATH=" FIXTURES " EVIL_MODE="
#define TRAIN_ARGS "train -q --config " TINY " --data " DATA " --out run ffn=evil"
#define assert_has(text, part) cr_assert(strstr((text), (part)), "'%s' not in: %s", (part), (text))

static void assert_named(const outcome *o, const char *what)
{
    assert_has(o->err, what);
    assert_has(o->err, "in forward of ffn plugin 'evil' (");
    assert_has(o->err, "ffn_evil.so), layer 0");
}

Test(faults, a_plugin_that_segfaults_is_named)
{
    outcome *o = run(TRAIN_EVIL "segv", TRAIN_ARGS);
    assert_named(o, "alphast: a segmentation fault (SIGSEGV)");
}

Test(faults, a_plugin_that_aborts_is_named)
{
    outcome *o = run(TRAIN_EVIL "abort", TRAIN_ARGS);
    assert_named(o, "alphast: an abort (SIGABRT)");
}

Test(faults, a_plugin_that_calls_exit_is_named)
{
    outcome *o = run(TRAIN_EVIL "exit", TRAIN_ARGS);
    cr_assert(WIFEXITED(o->status) && WEXITSTATUS(o->status) == 3, "status %d", o->status);
    assert_named(o, "alphast: exit() was called");
}

Test(faults, a_well_behaved_run_says_nothing_of_the_kind)
{
    outcome *o = run("ALPHAST_PLUGIN_PATH=" FIXTURES, TRAIN_ARGS);
    cr_assert_eq(o->status, 0, "%s", o->err);
    cr_assert_null(strstr(o->err, "alphast: exit()"), "%s", o->err);
}

Test(faults, a_file_that_is_not_a_shared_object_gets_the_real_reason)
{
    char dir[] = "/tmp/alphast-notelf-XXXXXX", path[256], env[300];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ffn_bogus.so", dir);
    FILE *f = fopen(path, "w");
    fputs("this is text, not ELF\n", f);
    fclose(f);
    snprintf(env, sizeof env, "ALPHAST_PLUGIN_PATH=%s", dir);
    outcome *o = run(env, "train -q --config " TINY " --data " DATA " --out run ffn=bogus");
    cr_assert_neq(o->status, 0);
    assert_has(o->err, "cannot load ffn plugin 'bogus' from ");
    assert_has(o->err, "ffn_bogus.so: ");
    cr_assert_null(strstr(o->err, "file not found"), "%s", o->err);
    remove(path);
    rmdir(dir);
}

Test(faults, a_world_writable_plugin_directory_is_warned_about)
{
    char dir[] = "/tmp/alphast-ww-XXXXXX", env[300];
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(chmod(dir, 0777), 0);
    snprintf(env, sizeof env, "ALPHAST_PLUGIN_PATH=%s", dir);
    outcome *o = run(env, "plugins");
    assert_has(o->err, "ignoring plugin directory ");
    assert_has(o->err, "is writable by every user");
    assert_has(o->err, "chmod o-w");
    rmdir(dir);
}

#define DENSE_SO ALPHAST_BUILD_DIR "/plugins/ffn/.libs/ffn_dense.so"
#define LOAD_MINE "train -q --config " TINY " --data " DATA " --out run ffn=mine"

/* dir/plugins/ffn/ffn_mine.so (as `sub`), a copy of the dense FFN, with
 * the directories' and the file's modes; dir is made by mkdtemp. */
static void plant(char *dir, const char *sub, mode_t dir_mode, mode_t file_mode)
{
    char cmd[1024];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "mkdir -p %s/%s && cp " DENSE_SO " %s/%s/ffn_mine.so && chmod %o %s/%s/ffn_mine.so && "
             "chmod %o %s/%s %s", dir, sub, dir, sub, (unsigned)file_mode, dir, sub, (unsigned)dir_mode, dir, sub, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void remove_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Each of these loaded ffn_mine.so without a word (round-3 reproducers). */
static void expect_skipped(const char *env, const char *warning)
{
    outcome *o = run(env, LOAD_MINE);
    cr_assert_neq(o->status, 0, "the plugin was loaded: %s", o->err);
    assert_has(o->err, warning);
    assert_has(o->err, "alphast-run: no "); /* the build dir's case misses an attention plugin first */
    assert_has(o->err, " plugin named '");
}

Test(faults, a_group_writable_path_directory_is_skipped)
{
    char dir[] = "/tmp/alphast-gw-XXXXXX", env[300];
    plant(dir, ".", 0775, 0755);
    snprintf(env, sizeof env, "ALPHAST_PLUGIN_PATH=%s/.", dir);
    expect_skipped(env, "is writable by its group");
    remove_tree(dir);
}

Test(faults, a_world_writable_plugin_file_is_skipped)
{
    char dir[] = "/tmp/alphast-wf-XXXXXX", env[300];
    plant(dir, ".", 0755, 0666);
    snprintf(env, sizeof env, "ALPHAST_PLUGIN_PATH=%s/.", dir);
    expect_skipped(env, "ignoring plugin file ");
    remove_tree(dir);
}

/* run() works in a new directory under /tmp: ../NAME is relative to it. */
Test(faults, a_relative_path_entry_is_skipped)
{
    char dir[] = "/tmp/alphast-rel-XXXXXX", env[300];
    plant(dir, ".", 0755, 0755);
    snprintf(env, sizeof env, "ALPHAST_PLUGIN_PATH=../%s", dir + strlen("/tmp/"));
    expect_skipped(env, "ignoring the relative directory");
    remove_tree(dir);
}

/* ALPHAST_BUILD_DIR puts DIR/plugins/<kind> in place of the installed
 * plugins: it is checked as the path is. */
Test(faults, a_world_writable_build_dir_is_skipped)
{
    char dir[] = "/tmp/alphast-bd-XXXXXX", env[300];
    plant(dir, "plugins/ffn", 0777, 0755);
    snprintf(env, sizeof env, "ALPHAST_BUILD_DIR=%s", dir);
    expect_skipped(env, "is writable by every user");
    remove_tree(dir);
}

Test(faults, a_path_plugin_that_replaces_a_built_in_one_is_named)
{
    char dir[] = "/tmp/alphast-sh-XXXXXX", env[300];
    plant(dir, ".", 0755, 0755);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mv %s/ffn_mine.so %s/ffn_dense.so", dir, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(env, sizeof env, "ALPHAST_PLUGIN_PATH=%s", dir);
    outcome *o = run(env, "plugins");
    cr_assert_eq(o->status, 0, "%s", o->err);
    assert_has(o->err, "/ffn_dense (from ALPHAST_PLUGIN_PATH) is used instead of the built-in ");
    remove_tree(dir);
}
