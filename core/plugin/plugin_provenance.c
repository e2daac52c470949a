/* What a run records of the plugins it ran (loader.h): each loaded one's
 * kind, name, version, file and the file's SHA-256, so that a run made
 * with a plugin built out of tree can be traced to the exact .so. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_internal.h"

/* The SHA-256 (Nettle's) of the file at path into hex, as sha256sum
 * prints it; 0, or -1 with e set. */
static int hash_file(const char *path, char hex[65], ast_error *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ast_error_set(e, "%s: cannot read the plugin to record it: %s", path, strerror(errno));
        return -1;
    }
    struct sha256_ctx s;
    sha256_init(&s);
    unsigned char buf[1 << 16], digest[SHA256_DIGEST_SIZE];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f))) sha256_update(&s, n, buf);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        ast_error_set(e, "%s: read error while recording the plugin", path);
        return -1;
    }
    sha256_digest(&s, sizeof digest, digest);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return 0;
}

static cJSON *plugin_entry(const ast_plugin *p, ast_error *e)
{
    char path[PATH_MAX], hex[65];
    const char *file = realpath(p->path, path) ? path : p->path;
    if (hash_file(file, hex, e) < 0) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", ast_kind_name(p->kind));
    cJSON_AddStringToObject(o, "name", p->desc.name);
    cJSON_AddStringToObject(o, "version", p->desc.version ? p->desc.version : "");
    cJSON_AddStringToObject(o, "path", file);
    cJSON_AddStringToObject(o, "sha256", hex);
    return o;
}

char *ast_plugins_provenance(ast_error *e)
{
    int n;
    const ast_plugin *const *loaded = ast_plugins_loaded(&n);
    cJSON *list = cJSON_CreateArray();
    AST_ASSERT(list, "out of memory listing the plugins");
    for (int i = 0; i < n; i++) {
        cJSON *o = plugin_entry(loaded[i], e);
        if (!o) {
            cJSON_Delete(list);
            return NULL;
        }
        cJSON_AddItemToArray(list, o);
    }
    char *text = cJSON_Print(list);
    cJSON_Delete(list);
    AST_ASSERT(text, "out of memory printing the plugins");
    char *copy = ast_xstrdup(text); /* cJSON's allocator may not be the caller's free() */
    cJSON_free(text);
    return copy;
}
