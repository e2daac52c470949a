/* AnnData .h5ad files through libhdf5 (ast_data_read_h5ad_direct): any bytes
 * either fail with a message or give cells, genes and finite values, and
 * so does preprocessing. Each input is read twice: with the default keys
 * (obsm/spatial only) and naming obs columns for the slice and the cell
 * type, so the obs readers (categorical and string columns) are reached.
 * The parse runs in this process, not in the helper process with a time
 * limit that ast_data_read_h5ad forks: there its crashes would be errors
 * and its hangs would end at the limit, hidden from the fuzzer. */
#include <hdf5.h>
#include <math.h>

#include "fuzz_data.h"

/* Beyond what every reader must give: slices and cell types in range, named. */
static void check_dataset(const ast_dataset *d, const char *when)
{
    fuzz_check_dataset(d, when);
    FUZZ_CHECK(d->n_slices >= 1, "%s: %d slices", when, d->n_slices);
    for (int64_t c = 0; c < d->n_cells; c++) {
        FUZZ_CHECK(d->slice[c] >= 0 && d->slice[c] < d->n_slices, "%s: cell %lld in slice %d of %d", when,
                   (long long)c, d->slice[c], d->n_slices);
        if (d->cell_type)
            FUZZ_CHECK(d->cell_type[c] >= -1 && d->cell_type[c] < d->n_types, "%s: cell %lld has type %d of %d",
                       when, (long long)c, d->cell_type[c], d->n_types);
    }
    for (int t = 0; t < d->n_types; t++) FUZZ_CHECK(d->type_names[t], "%s: type %d has no name", when, t);
}

static void read_once(const char *path, const char *cell_type_key, const char *slice_key)
{
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.cell_type_key = cell_type_key;
    o.slice_key = slice_key;
    ast_error e = {""};
    ast_dataset d;
    if (ast_data_read_h5ad_direct(path, &o, &d, &e) != 0) {
        FUZZ_CHECK_ERROR(&e, "ast_data_read_h5ad_direct");
        return;
    }
    check_dataset(&d, "read");
    if (ast_data_preprocess(&d, &o, &e) == 0)
        check_dataset(&d, "preprocessed");
    else
        FUZZ_CHECK_ERROR(&e, "ast_data_preprocess");
    ast_dataset_free(&d);
}

/* The reader closes everything it opened, on every path. */
static void check_closed(void)
{
    ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    FUZZ_CHECK(open_ids == 0, "%zd HDF5 objects left open after a read", open_ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A new name each time, so a file left open by a failed read is
     * never mistaken by libhdf5 for the next input. */
    static unsigned long n;
    char name[64], path[4200];
    snprintf(name, sizeof name, "data-%lu.h5ad", n++);
    fuzz_path(name, path, sizeof path);
    fuzz_write(path, data, size);
    read_once(path, NULL, NULL);
    check_closed();
    read_once(path, "cell_type", "slice");
    check_closed();
    unlink(path);
    return 0;
}
