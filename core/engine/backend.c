/* The table of backends a config's `device:` can name: the CPU, the
 * backends this build compiled in, and those registered at run time. */
#include <string.h>

#include "engine/backend.h"

enum { MAX_BACKENDS = 8 };
static const ast_backend *backends[MAX_BACKENDS];
static int n_backends;
static char names[256];

static void add(const ast_backend *b)
{
    backends[n_backends++] = b;
    if (names[0]) strcat(names, "|");
    strcat(names, b->name);
}

static void init_table(void)
{
    if (n_backends) return;
    add(ast_backend_cpu());
#if AST_HAVE_CUDA
    add(ast_backend_cuda());
#endif
}

const ast_backend *ast_backend_find(const char *name)
{
    init_table();
    for (int i = 0; i < n_backends; i++)
        if (!strcmp(backends[i]->name, name)) return backends[i];
    return NULL;
}

const char *ast_backend_names(void)
{
    init_table();
    return names;
}

const ast_backend *ast_backend_require(const char *name, ast_error *e)
{
    const ast_backend *b = ast_backend_find(name ? name : "cpu");
    if (!b) ast_error_set(e, "'%s' is not a device of this build; choose one of %s", name, ast_backend_names());
    return b;
}

int ast_backend_register(const ast_backend *b)
{
    if (ast_backend_find(b->name) || n_backends == MAX_BACKENDS) return -1;
    if (strlen(names) + strlen(b->name) + 2 > sizeof names) return -1;
    add(b);
    return 0;
}

double ast_backend_sum_squares(const ast_backend *b, float *const *xs, const int64_t *ns, int n, float max_norm)
{
    double *d = b->buffer_alloc(b, sizeof *d), sq;
    AST_ASSERT(d, "out of %s memory", b->name);
    b->sum_squares(b, xs, ns, n, d);
    if (max_norm > 0) b->clip(b, xs, ns, n, d, max_norm);
    b->to_host(b, &sq, d, sizeof sq);
    b->buffer_free(b, d);
    return sq;
}
