/* The user's own split (data.split_key): an obs column whose value is
 * train, val or test for every cell. Anything else is an error naming the
 * file, the column, the cell and its value: a typo would otherwise move
 * cells between train and test without a word. */
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "data/data_labels.h"
#include "data/data_split.h"

static const char *const split_values[3] = {"train", "val", "test"};

static const ast_obs_column *find_column(const ast_dataset *d, const char *key, ast_error *e)
{
    const char **names = ast_xmalloc((size_t)(d->n_obs ? d->n_obs : 1) * sizeof *names);
    for (int i = 0; i < d->n_obs; i++) {
        if (!strcmp(d->obs[i].name, key)) {
            free(names);
            return &d->obs[i];
        }
        names[i] = d->obs[i].name;
    }
    const char *near = ast_did_you_mean(key, (const char *const *)names, d->n_obs);
    ast_error_set(e, "%s: data.split_key: no obs column '%s'%s%s%s; name the column holding train / val / test "
                  "per cell", d->source, key, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    free(names);
    return NULL;
}

static void cell_name(const ast_dataset *d, int64_t c, char *buf, size_t n)
{
    if (d->cell_names) snprintf(buf, n, "'%s'", d->cell_names[c]);
    else snprintf(buf, n, "%lld", (long long)c);
}

int split_by_key(const ast_dataset *d, const ast_split_opts *o, ast_split out[3], ast_error *e)
{
    if (!o->key) {
        ast_error_set(e, "%s: data.split: key needs data.split_key, the obs column holding train / val / test per "
                      "cell", d->source);
        return -1;
    }
    const ast_obs_column *col = find_column(d, o->key, e);
    if (!col) return -1;
    char **names;
    int n_names, rc = 0;
    int *codes = ast_labels_of_column(col, d->n_cells, &names, &n_names);
    int *which = ast_xmalloc((size_t)(n_names ? n_names : 1) * sizeof *which);
    for (int i = 0; i < n_names; i++) which[i] = ast_name_index(names[i], split_values, 3);
    for (int64_t c = 0; c < d->n_cells && rc == 0; c++) {
        int w = codes[c] < 0 ? -1 : which[codes[c]];
        if (w >= 0) {
            split_push(&out[w], c);
            continue;
        }
        char cell[256];
        cell_name(d, c, cell, sizeof cell);
        ast_error_set(e, "%s: obs column '%s' (data.split_key): cell %s has %s%s%s; every cell needs train, val or "
                      "test (relabel it in the column, or drop the cell)", d->source, o->key, cell,
                      codes[c] < 0 ? "no value" : "'", codes[c] < 0 ? "" : names[codes[c]], codes[c] < 0 ? "" : "'");
        rc = -1;
    }
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names), free(codes), free(which);
    return rc;
}
