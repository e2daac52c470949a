/* The sweep ledger (SWEEP_DIR/ledger.jsonl, sweep/ledger.h): any bytes,
 * as a crash, a full disk or another version may leave them, read as each
 * run's history. Every run is found by its name with its last state, and
 * has a line in that state. A line appended for each run then reads back
 * as that run's last line, with one line more, whatever came before it (a
 * torn line without its newline included). */
#include "fuzz.h"
#include "sweep/ledger.h"

enum { MAX_APPENDS = 8 };

static int same_text(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static void check_runs(const ast_ledger *l)
{
    for (int i = 0; i < ast_ledger_n_runs(l); i++) {
        const ast_ledger_run *r = ast_ledger_run_at(l, i);
        ast_run_state state;
        double time;
        FUZZ_CHECK(ast_ledger_last(l, r->run, &state, &time) && state == r->state && time == r->time,
                   "run %d '%s' is not found by its name with its last state", i, r->run);
        FUZZ_CHECK(r->lines[r->state] >= 1 && ast_ledger_count(l, r->run, r->state) == r->lines[r->state],
                   "run '%s' ends in state %s without a line in it", r->run, ast_run_state_name(r->state));
    }
}

/* The entry appended for run i: the next state, the fields it had. */
static ast_ledger_entry entry_for(const ast_ledger_run *r)
{
    return (ast_ledger_entry){.run = r->run, .config_name = r->config_name ? r->config_name : "Fuzz",
                              .hash = "0123456789abcdef", .dir = "runs/fuzz", .seed = 1,
                              .state = (ast_run_state)((r->state + 1) % 4), .pid = r->pid, .exit_code = -1,
                              .reason = r->reason, .host = r->host, .job = r->job, .gpu = r->gpu};
}

static void check_appended(const ast_ledger *before, const ast_ledger *after, int n)
{
    FUZZ_CHECK(ast_ledger_n_runs(after) == ast_ledger_n_runs(before), "appending to known runs made %d runs of %d",
               ast_ledger_n_runs(after), ast_ledger_n_runs(before));
    for (int i = 0; i < n; i++) {
        const ast_ledger_run *was = ast_ledger_run_at(before, i), *now = ast_ledger_run_at(after, i);
        ast_ledger_entry en = entry_for(was);
        FUZZ_CHECK(!strcmp(was->run, now->run), "run %d was '%s', is '%s'", i, was->run, now->run);
        FUZZ_CHECK(now->state == en.state && now->pid == en.pid && now->time > 0,
                   "run '%s': the appended line reads back as state %s, pid %d, time %g", now->run,
                   ast_run_state_name(now->state), now->pid, now->time);
        FUZZ_CHECK(same_text(now->config_name, en.config_name) && same_text(now->reason, en.reason) &&
                       same_text(now->host, en.host) && same_text(now->job, en.job) && same_text(now->gpu, en.gpu),
                   "run '%s': a text field of the appended line reads back changed", now->run);
        for (int s = 0; s < 4; s++)
            FUZZ_CHECK(now->lines[s] == was->lines[s] + (s == (int)en.state), "run '%s': %d lines in state %s, had %d",
                       now->run, now->lines[s], ast_run_state_name((ast_run_state)s), was->lines[s]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200];
    const char *dir = fuzz_dir();
    fuzz_write(fuzz_path("ledger.jsonl", path, sizeof path), data, size);
    ast_error e = {""};
    ast_ledger *l = ast_ledger_read(dir, &e);
    FUZZ_CHECK(l, "a readable ledger was refused: %s", e.msg);
    check_runs(l);
    int n = ast_ledger_n_runs(l) < MAX_APPENDS ? ast_ledger_n_runs(l) : MAX_APPENDS;
    for (int i = 0; i < n; i++) {
        ast_ledger_entry en = entry_for(ast_ledger_run_at(l, i));
        FUZZ_CHECK(ast_ledger_append(dir, &en, &e) == 0, "appending failed: %s", e.msg);
    }
    ast_ledger *again = ast_ledger_read(dir, &e);
    FUZZ_CHECK(again, "the ledger does not read after appending: %s", e.msg);
    check_runs(again);
    check_appended(l, again, n);
    ast_ledger_free(again);
    ast_ledger_free(l);
    unlink(path);
    return 0;
}
