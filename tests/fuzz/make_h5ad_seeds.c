/* Writes the tiny .h5ad seeds of the h5ad fuzz target (5 cells x 3 genes)
 * into the directory given: the encodings anndata >= 0.8 writes that
 * ast_data_read_h5ad reads. Built and run by tests/fuzz/make_corpus.sh:
 *   cc make_h5ad_seeds.c $(pkg-config --cflags --libs hdf5) -o mk && ./mk DIR */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { CELLS = 5, GENES = 3 };

static void attr_str(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, &value);
    H5Aclose(a), H5Sclose(sp), H5Tclose(t);
}

static void encoding(hid_t obj, const char *type, const char *version)
{
    attr_str(obj, "encoding-type", type);
    attr_str(obj, "encoding-version", version);
}

static hid_t dataset(hid_t loc, const char *name, hid_t type, int ndim, hsize_t d0, hsize_t d1, const void *data)
{
    hsize_t dims[2] = {d0, d1};
    hid_t sp = H5Screate_simple(ndim, dims, NULL);
    hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Sclose(sp);
    return d;
}

static void strings(hid_t loc, const char *name, int fixed, int n, const char *const *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t d;
    if (fixed) {
        char buf[16][8] = {{0}};
        for (int i = 0; i < n; i++) snprintf(buf[i], sizeof buf[i], "%s", v[i]);
        H5Tset_size(t, 8);
        d = dataset(loc, name, t, 1, (hsize_t)n, 1, buf);
    } else {
        H5Tset_size(t, H5T_VARIABLE);
        d = dataset(loc, name, t, 1, (hsize_t)n, 1, v);
    }
    encoding(d, "string-array", "0.2.0");
    H5Dclose(d), H5Tclose(t);
}

static void categorical(hid_t obs, const char *name, int n_cat, const char *const *cats, const int8_t *codes)
{
    hid_t g = H5Gcreate2(obs, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    encoding(g, "categorical", "0.2.0");
    hid_t d = dataset(g, "codes", H5T_NATIVE_INT8, 1, CELLS, 1, codes);
    H5Dclose(d);
    strings(g, "categories", 0, n_cat, cats);
    H5Gclose(g);
}

static void sparse(hid_t f, int csr, const float x[CELLS][GENES])
{
    hid_t g = H5Gcreate2(f, "X", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    encoding(g, csr ? "csr_matrix" : "csc_matrix", "0.1.0");
    int64_t shape[2] = {CELLS, GENES};
    hsize_t two = 2;
    hid_t sp = H5Screate_simple(1, &two, NULL), a = H5Acreate2(g, "shape", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, shape);
    H5Aclose(a), H5Sclose(sp);
    float data[CELLS * GENES];
    int32_t idx[CELLS * GENES];
    int64_t ptr[CELLS + GENES + 1];
    int outer = csr ? CELLS : GENES, inner = csr ? GENES : CELLS, nnz = 0;
    ptr[0] = 0;
    for (int o = 0; o < outer; o++) {
        for (int i = 0; i < inner; i++) {
            float v = csr ? x[o][i] : x[i][o];
            if (v != 0.0f) data[nnz] = v, idx[nnz++] = i;
        }
        ptr[o + 1] = nnz;
    }
    H5Dclose(dataset(g, "data", H5T_NATIVE_FLOAT, 1, (hsize_t)nnz, 1, data));
    H5Dclose(dataset(g, "indices", H5T_NATIVE_INT32, 1, (hsize_t)nnz, 1, idx));
    H5Dclose(dataset(g, "indptr", H5T_NATIVE_INT64, 1, (hsize_t)outer + 1, 1, ptr));
    H5Gclose(g);
}

/* kind 0: dense X, 3-D coordinates, categorical cell_type, string slice;
 * 1: CSR, 2-D coordinates, categorical slice, string cell_type, fixed-length gene names;
 * 2: CSC, 3-D coordinates, no obs columns. */
static int write_one(const char *dir, const char *name, int kind)
{
    static const float x[CELLS][GENES] = {{1, 0, 2}, {0, 3, 0}, {4, 5, 6}, {0, 0, 7}, {8, 0, 0}};
    static const char *const genes[GENES] = {"Slc17a7", "Mgp", "Gad1"};
    static const char *const cells[CELLS] = {"c0", "c1", "c2", "c3", "c4"};
    static const char *const types[2] = {"Exc", "Inh"}, *const slices[CELLS] = {"s1", "s1", "s2", "s2", "s2"};
    static const int8_t type_codes[CELLS] = {0, 1, 0, -1, 1}, slice_codes[CELLS] = {0, 0, 1, 1, 1};
    float pos[CELLS][3];
    for (int c = 0; c < CELLS; c++) pos[c][0] = (float)c, pos[c][1] = (float)(c * c), pos[c][2] = 0.5f * (float)c;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) return -1;
    encoding(f, "anndata", "0.1.0");
    if (kind == 0) {
        hid_t d = dataset(f, "X", H5T_NATIVE_FLOAT, 2, CELLS, GENES, x);
        encoding(d, "array", "0.2.0");
        H5Dclose(d);
    } else {
        sparse(f, kind == 1, x);
    }
    hid_t var = H5Gcreate2(f, "var", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    encoding(var, "dataframe", "0.2.0");
    attr_str(var, "_index", "_index");
    strings(var, "_index", kind == 1, GENES, genes);
    H5Gclose(var);
    hid_t obs = H5Gcreate2(f, "obs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    encoding(obs, "dataframe", "0.2.0");
    attr_str(obs, "_index", "_index");
    strings(obs, "_index", 0, CELLS, cells);
    if (kind == 0) {
        categorical(obs, "cell_type", 2, types, type_codes);
        strings(obs, "slice", 0, CELLS, slices);
    } else if (kind == 1) {
        static const char *const slice_names[2] = {"a", "b"};
        categorical(obs, "slice", 2, slice_names, slice_codes);
        strings(obs, "cell_type", 1, CELLS, slices);
    }
    H5Gclose(obs);
    hid_t obsm = H5Gcreate2(f, "obsm", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    encoding(obsm, "dict", "0.1.0");
    if (kind == 1) {
        float p2[CELLS][2];
        for (int c = 0; c < CELLS; c++) p2[c][0] = pos[c][0], p2[c][1] = pos[c][1];
        H5Dclose(dataset(obsm, "spatial", H5T_NATIVE_FLOAT, 2, CELLS, 2, p2));
    } else if (kind == 2) {
        double p3[CELLS][3];
        for (int c = 0; c < CELLS; c++)
            for (int k = 0; k < 3; k++) p3[c][k] = pos[c][k];
        H5Dclose(dataset(obsm, "spatial", H5T_NATIVE_DOUBLE, 2, CELLS, 3, p3));
    } else {
        H5Dclose(dataset(obsm, "spatial", H5T_NATIVE_FLOAT, 2, CELLS, 3, pos));
    }
    H5Gclose(obsm);
    H5Fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    return write_one(argv[1], "dense.h5ad", 0) || write_one(argv[1], "csr.h5ad", 1) || write_one(argv[1], "csc.h5ad", 2);
}
