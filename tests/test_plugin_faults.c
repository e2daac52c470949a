/* Plugins that go wrong, seen by a user of alphast-run: a plugin that
 * crashes or calls exit() inside forward is named in one line on stderr; a
 * file that is not a shared object gets the loader's real reason; a plugin
 * directory anyone can write is warned about. */
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
    assert_has(o->err, "is writable by every user");
    assert_has(o->err, "chmod o-w");
    rmdir(dir);
}
