#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_fixture.h"

/* Loaded once each and kept for the test binary's life, as the host keeps its plugins. */
static struct {
    char path[4096];
    ast_test_plugin *p;
} loaded[16];

const ast_plugin_desc *pf_load(const char *area, const char *file)
{
    const char *dir = getenv("ALPHAST_BUILD_DIR");
    char path[4096], err[1024] = "";
    snprintf(path, sizeof path, "%s/plugins/%s/%s", dir ? dir : ALPHAST_BUILD_DIR, area, file);
    int i = 0;
    while (i < 16 && loaded[i].p && strcmp(loaded[i].path, path)) i++;
    cr_assert_lt(i, 16, "more plugins than pf_load keeps");
    if (!loaded[i].p) {
        loaded[i].p = ast_test_load(path, err, sizeof err);
        cr_assert_not_null(loaded[i].p, "%s", err);
        snprintf(loaded[i].path, sizeof loaded[i].path, "%s", path);
    }
    return ast_test_desc(loaded[i].p);
}

pf_instance pf_create(const ast_plugin_desc *d, const char *prefix, const ast_layer_dims *dims, uint64_t seed,
                      const char *const *overrides, int n_overrides)
{
    pf_instance pi;
    char err[1024] = "";
    cr_assert_eq(ast_test_create(&pi, d, prefix, dims, seed, overrides, n_overrides, err, sizeof err), 0, "%s", err);
    return pi;
}

gc_result pf_gradcheck(const pf_instance *pi, ast_tensor *x, ast_tensor *mask, int training, float h,
                       double floor)
{
    ast_test_gc_opts o = {.h = h, .floor = floor, .training = training};
    ast_test_gc_result r = ast_test_gradcheck(pi, x, &(ast_fwd_args){.mask = mask}, &o);
    return (gc_result){r.max_err, r.worst_input, r.worst_index, r.analytic, r.numeric};
}
