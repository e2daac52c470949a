/* What a plugin's descriptor must satisfy before the host uses it: an ABI
 * this host speaks, the kind and name its file name promises, the entry
 * points of its kind, and an option table whose defaults are valid. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "plugin/plugin_internal.h"

/* Every descriptor has at least the fields of ABI 1.0, up to `observe`;
 * later minors append fields, which stay zero for older plugins. */
#define DESC_MIN_SIZE (offsetof(ast_plugin_desc, observe) + sizeof(((ast_plugin_desc *)0)->observe))

int ast_desc_adopt(const ast_plugin_desc *raw, ast_plugin_desc *out, char *why, size_t n)
{
    if (raw->abi_major != AST_ABI_MAJOR || raw->abi_minor > AST_ABI_MINOR) {
        snprintf(why, n, "was built for plugin ABI %u.%u, which this alphast (ABI %d.%d) cannot load; "
                 "rebuild it against this alphast's plugin.h", raw->abi_major, raw->abi_minor, AST_ABI_MAJOR, AST_ABI_MINOR);
        return 0;
    }
    if (raw->struct_size < DESC_MIN_SIZE) {
        snprintf(why, n, "has a descriptor of %u bytes, smaller than the %zu of ABI %d.0; rebuild it against plugin.h",
                 raw->struct_size, DESC_MIN_SIZE, AST_ABI_MAJOR);
        return 0;
    }
    /* Its minor is not newer than ours, so neither is its descriptor. */
    if (raw->struct_size > sizeof *out) {
        snprintf(why, n, "has a descriptor of %u bytes, larger than the %zu of ABI %d.%d it claims; rebuild it "
                 "against plugin.h (.struct_size = sizeof(ast_plugin_desc))", raw->struct_size, sizeof *out,
                 AST_ABI_MAJOR, AST_ABI_MINOR);
        return 0;
    }
    memset(out, 0, sizeof *out);
    memcpy(out, raw, raw->struct_size < sizeof *out ? raw->struct_size : sizeof *out);
    return 1;
}

static int check_identity(const ast_plugin_desc *d, ast_plugin_kind kind, const char *name, char *why, size_t n)
{
    if (d->kind != kind) {
        if (d->kind >= AST_KIND_ATTENTION && d->kind <= AST_KIND_MONITOR)
            snprintf(why, n, "declares kind '%s' but its file name says %s; rename the file to %s_%s or fix .kind",
                     ast_kind_name(d->kind), ast_kind_name(kind), ast_kind_prefix(d->kind), name);
        else
            snprintf(why, n, "declares kind %d, which is none of attention, ffn, monitor", (int)d->kind);
        return 0;
    }
    if (!d->name || strcmp(d->name, name)) {
        snprintf(why, n, "calls itself '%s' but its file is named for '%s'; make .name and the file name agree",
                 d->name ? d->name : "(null)", name);
        return 0;
    }
    if (!d->version || !d->summary) {
        snprintf(why, n, "has no %s; set it in the descriptor", d->version ? "summary" : "version");
        return 0;
    }
    return 1;
}

static int check_entry_points(const ast_plugin_desc *d, char *why, size_t n)
{
    const char *missing = NULL;
    if (!d->create) missing = "create";
    else if (d->kind != AST_KIND_MONITOR && !d->forward) missing = "forward";
    else if (d->kind == AST_KIND_MONITOR && !d->observe) missing = "observe";
    if (missing) snprintf(why, n, "has no %s function; a %s plugin needs one", missing, ast_kind_name(d->kind));
    return !missing;
}

static int check_option(const ast_plugin_desc *d, int i, char *why, size_t n)
{
    const ast_option_spec *s = &d->options[i];
    ast_optval v;
    char reason[512];
    if (!s->name || !*s->name || !s->def) {
        snprintf(why, n, "has option %d without a %s", i, s->name && *s->name ? "default" : "name");
        return 0;
    }
    for (int j = 0; j < i; j++)
        if (!strcmp(d->options[j].name, s->name)) {
            snprintf(why, n, "declares option '%s' twice", s->name);
            return 0;
        }
    if (s->type == AST_OPT_ENUM && (!s->choices || !*s->choices)) {
        snprintf(why, n, "declares enum option '%s' without choices", s->name);
        return 0;
    }
    if (!ast_option_parse(s, s->def, &v, reason, sizeof reason)) {
        snprintf(why, n, "has an invalid default for option '%s': it %s", s->name, reason);
        return 0;
    }
    return 1;
}

static int check_kernels(const ast_plugin_desc *d, char *why, size_t n)
{
    if (d->n_kernels < 0 || (d->n_kernels > 0 && !d->kernels)) {
        snprintf(why, n, "has n_kernels = %d but %s", d->n_kernels, d->n_kernels < 0 ? "that is negative" : "no kernels table");
        return 0;
    }
    for (int i = 0; i < d->n_kernels; i++)
        if (!d->kernels[i].op || !d->kernels[i].backend || !d->kernels[i].fn) {
            snprintf(why, n, "has kernel %d without an op name, a backend or a function", i);
            return 0;
        }
    return 1;
}

int ast_desc_validate(const ast_plugin_desc *d, ast_plugin_kind kind, const char *name, char *why, size_t n)
{
    if (!check_identity(d, kind, name, why, n)) return 0;
    if (d->n_options < 0 || (d->n_options > 0 && !d->options)) {
        snprintf(why, n, "has n_options = %d but %s", d->n_options, d->n_options < 0 ? "that is negative" : "no options table");
        return 0;
    }
    for (int i = 0; i < d->n_options; i++)
        if (!check_option(d, i, why, n)) return 0;
    return check_kernels(d, why, n) && check_entry_points(d, why, n);
}

/* The backends the kernels table covers for `op`, '|'-joined into buf. */
static const char *kernel_backends(const ast_plugin_desc *d, const char *op, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < d->n_kernels; i++)
        if (!strcmp(d->kernels[i].op, op))
            snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", buf[0] ? "|" : "", d->kernels[i].backend);
    return buf;
}

int ast_plugin_check_backend(const ast_plugin *p, const char *backend, ast_error *e)
{
    const ast_plugin_desc *d = ast_plugin_desc_of(p);
    for (int i = 0; i < d->n_kernels; i++) {
        const char *op = d->kernels[i].op;
        if (ast_kernel_find(d->kernels, d->n_kernels, op, backend)) continue;
        char has[256];
        ast_error_set(e, "%s plugin '%s' (%s): its fused op '%s' has no kernel for backend '%s' (it has: %s); "
                      "choose device: %s, or another %s",
                      ast_kind_name(d->kind), d->name, ast_plugin_path(p), op, backend,
                      kernel_backends(d, op, has, sizeof has), d->kernels[i].backend, ast_kind_name(d->kind));
        return -1;
    }
    return 0;
}

int ast_plugin_dims_ok(const ast_plugin_desc *d, const ast_layer_dims *dims, char *why, size_t n)
{
    if (dims->d_model <= 0) {
        snprintf(why, n, "d_model %d is not positive", dims->d_model);
        return 0;
    }
    if (d->kind == AST_KIND_ATTENTION && (dims->heads <= 0 || dims->d_model % dims->heads)) {
        snprintf(why, n, "d_model %d is not a positive multiple of num_heads %d; choose num_heads dividing d_model",
                 dims->d_model, dims->heads);
        return 0;
    }
    return 1;
}
