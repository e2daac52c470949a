/* The gene list in the metadata of alphast's weights and checkpoints: a
 * model's input layer is sized by the gene count alone, so weights trained
 * on other genes (or the same ones in another order) would load without a
 * word unless the file says which genes it was trained on. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

char *ast_st_names_json(const char *const *names, int n)
{
    cJSON *a = cJSON_CreateStringArray(names, n);
    char *text = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    AST_ASSERT(text, "out of memory printing %d names as JSON", n);
    /* cJSON's allocator is malloc unless a caller swapped it; copy to be sure free() fits */
    char *copy = ast_xstrdup(text);
    cJSON_free(text);
    return copy;
}

/* The i-th name of the array, or "(none)" past its end (for the message). */
static const char *name_at(const cJSON *a, int i)
{
    const cJSON *s = cJSON_GetArrayItem(a, i);
    return cJSON_IsString(s) ? s->valuestring : "(none)";
}

static int first_difference(const cJSON *a, const char *const *genes, int n)
{
    int stored = cJSON_GetArraySize(a), i = 0;
    while (i < n && i < stored && !strcmp(name_at(a, i), genes[i])) i++;
    return i == n && i == stored ? -1 : i;
}

int ast_st_check_genes(const ast_st_file *f, const char *const *genes, int n, ast_error *e)
{
    const char *text = ast_st_metadata(f, AST_META_GENES), *version = ast_st_metadata(f, AST_META_VERSION);
    /* alphast records the genes in every file it writes: one without them
     * was altered. A PyTorch state_dict never has them: say what cannot be
     * checked, since the input layer fits any gene list of the same size. */
    if (!text && version) {
        ast_error_set(e, "%s: written by alphast %s, but its gene list (metadata '%s') was removed, so its genes "
                      "cannot be checked against the data's; restore the file from its run", ast_st_path(f), version,
                      AST_META_GENES);
        return -1;
    }
    if (!text) {
        ast_log(AST_LOG_WARN, "%s has no gene list (metadata '%s'; a PyTorch state_dict has none): make sure it was "
                "trained on the data's %d genes in the same order", ast_st_path(f), AST_META_GENES, n);
        return 0;
    }
    cJSON *a = cJSON_Parse(text);
    int bad = !cJSON_IsArray(a), at = bad ? 0 : first_difference(a, genes, n);
    if (bad)
        ast_error_set(e, "%s: metadata '%s' is not a JSON array of gene names; the file is damaged: restore it",
                      ast_st_path(f), AST_META_GENES);
    else if (at >= 0)
        ast_error_set(e, "%s: trained on %d genes, the data has %d; gene %d is '%s' there and '%s' here; use "
                      "data with the genes it was trained on, in the same order", ast_st_path(f),
                      cJSON_GetArraySize(a), n, at + 1, name_at(a, at), at < n ? genes[at] : "(none)");
    cJSON_Delete(a);
    return bad || at >= 0 ? -1 : 0;
}
