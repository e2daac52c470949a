/* Schedule tables (train --schedule FILE.safetensors, train/schedule_table.h):
 * any bytes either load or fail with a message. A table that loads has
 * at least one column, columns of one length with values finite and >= 0, named columns that
 * are not "lr" and differ from each other; every step looks up, the step
 * past the end is refused, and saved again it loads to the same table. */
#include <math.h>

#include "fuzz.h"
#include "train/schedule_table.h"

static void check_column(const float *v, int64_t steps, const char *name)
{
    for (int64_t s = 0; s < steps; s++)
        FUZZ_CHECK(isfinite(v[s]) && v[s] >= 0, "column '%s' is %g at step %lld", name, v[s], (long long)s);
}

static void check_table(const ast_schedule_table *t)
{
    FUZZ_CHECK(t->steps >= 0 && t->n >= 0 && t->n <= AST_MAX_SCHEDULED, "%lld steps, %d named columns",
               (long long)t->steps, t->n);
    FUZZ_CHECK(t->has_lr || t->n, "a table without columns loaded");
    if (t->has_lr) check_column(t->lr, t->steps, "lr");
    for (int i = 0; i < t->n; i++) {
        FUZZ_CHECK(t->names[i] && strcmp(t->names[i], "lr"), "named column %d is '%s'", i,
                   t->names[i] ? t->names[i] : "(null)");
        for (int j = 0; j < i; j++) FUZZ_CHECK(strcmp(t->names[i], t->names[j]), "column '%s' twice", t->names[i]);
        check_column(t->values[i], t->steps, t->names[i]);
    }
}

/* Every step gives its row; the step after the last is an error. */
static void check_lookup(ast_schedule_table *t)
{
    ast_error e = {""};
    for (int64_t s = 0; s < t->steps && s < 64; s++) {
        ast_schedule_values v = {.lr = -1};
        FUZZ_CHECK(ast_schedule_table_lookup(t, s, 0, &v, &e) == 0, "step %lld of %lld: %s", (long long)s,
                   (long long)t->steps, e.msg);
        FUZZ_CHECK(v.n == t->n && (!t->has_lr || v.lr == t->lr[s]), "step %lld: %d values, lr %g", (long long)s, v.n,
                   v.lr);
        for (int i = 0; i < v.n; i++)
            FUZZ_CHECK(!strcmp(v.named[i].name, t->names[i]) && v.named[i].value == t->values[i][s],
                       "step %lld: value %d is '%s' = %g", (long long)s, i, v.named[i].name, v.named[i].value);
    }
    ast_schedule_values past = {0};
    FUZZ_CHECK(ast_schedule_table_lookup(t, t->steps, 0, &past, &e) < 0, "the step after the last was looked up");
    FUZZ_CHECK_ERROR(&e, "ast_schedule_table_lookup");
}

static void check_same(const ast_schedule_table *a, const ast_schedule_table *b)
{
    size_t bytes = (size_t)a->steps * sizeof(float);
    FUZZ_CHECK(a->steps == b->steps && a->has_lr == b->has_lr && a->n == b->n,
               "saved and loaded again: %lld steps, lr %d, %d named; was %lld, %d, %d", (long long)b->steps,
               b->has_lr, b->n, (long long)a->steps, a->has_lr, a->n);
    FUZZ_CHECK(!a->has_lr || !memcmp(a->lr, b->lr, bytes), "saved and loaded again: lr changed");
    for (int i = 0; i < a->n; i++)
        FUZZ_CHECK(!strcmp(a->names[i], b->names[i]) && !memcmp(a->values[i], b->values[i], bytes),
                   "saved and loaded again: column %d '%s' changed", i, a->names[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200], copy[4200];
    fuzz_write(fuzz_path("in.safetensors", path, sizeof path), data, size);
    fuzz_path("again.safetensors", copy, sizeof copy);
    ast_error e = {""};
    ast_schedule_table t;
    if (ast_schedule_table_load(&t, path, &e) < 0) {
        FUZZ_CHECK_ERROR(&e, "ast_schedule_table_load");
        return 0;
    }
    check_table(&t);
    check_lookup(&t);
    ast_schedule_table again;
    FUZZ_CHECK(ast_schedule_table_save(&t, copy, "fuzz", &e) == 0, "a loaded table cannot be saved: %s", e.msg);
    FUZZ_CHECK(ast_schedule_table_load(&again, copy, &e) == 0, "a saved table does not load: %s", e.msg);
    check_same(&t, &again);
    ast_schedule_table_free(&again);
    ast_schedule_table_free(&t);
    return 0;
}
