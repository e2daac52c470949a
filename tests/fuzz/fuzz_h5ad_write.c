/* The .h5ad writer against the reader (`sample --out x.h5ad`, then training
 * or evaluating on what it wrote): the input's bytes make a small frame (X,
 * var and obs names, spatial coordinates in 2 or 3 dimensions, a second
 * obsm matrix, obs columns of each kind with their names and categories,
 * uns strings), written with ast_h5ad_write. A failed write says why
 * without blaming the disk (this one has room), leaves no file and no HDF5
 * object open. A written file reads back with ast_data_read_h5ad_direct
 * (in this process, as the h5ad target does) to the same frame: cells,
 * genes, counts, coordinates, obs names and every obs column. */
#include <hdf5.h>
#include <math.h>

#include "fuzz_data.h"
#include "io/h5ad_write.h"

enum { MAX_CELLS = 8, MAX_GENES = 6, MAX_OBS = 4, MAX_CATS = 4, MAX_TEXT = 8 };

/* The input, read a byte at a time; past its end every byte is 0. */
typedef struct bytes {
    const uint8_t *p;
    size_t n;
} bytes;

static unsigned next(bytes *b)
{
    if (!b->n) return 0;
    b->n--;
    return *b->p++;
}

/* A name of up to MAX_TEXT bytes, any byte but NUL (which ends it). */
static char *text(bytes *b, char *buf)
{
    unsigned len = next(b) % (MAX_TEXT + 1), i = 0;
    for (; i < len; i++)
        if (!(buf[i] = (char)next(b))) break;
    buf[i] = 0;
    return buf;
}

/* Everything the table points to. */
typedef struct frame {
    ast_h5ad_table t;
    float X[MAX_CELLS * MAX_GENES], spatial[MAX_CELLS * 3], extra[MAX_CELLS * 3];
    char gene_text[MAX_GENES][MAX_TEXT + 1], cell_text[MAX_CELLS][MAX_TEXT + 1], obsm_name[MAX_TEXT + 1];
    const char *genes[MAX_GENES], *cells[MAX_CELLS];
    ast_h5ad_column obs[MAX_OBS];
    char obs_name[MAX_OBS][MAX_TEXT + 1], cat_text[MAX_OBS][MAX_CATS][MAX_TEXT + 1];
    const char *cats[MAX_OBS][MAX_CATS];
    int64_t ints[MAX_OBS][MAX_CELLS];
    double numbers[MAX_OBS][MAX_CELLS];
    int codes[MAX_OBS][MAX_CELLS];
    char uns_text[2][MAX_TEXT + 1];
    const char *uns[3];
} frame;

static void make_column(bytes *b, frame *f, int j)
{
    ast_h5ad_column *c = &f->obs[j];
    c->name = text(b, f->obs_name[j]);
    c->kind = (ast_h5ad_kind)(next(b) % 3);
    c->ints = f->ints[j], c->numbers = f->numbers[j], c->codes = f->codes[j], c->categories = f->cats[j];
    c->n_categories = 1 + (int)(next(b) % MAX_CATS);
    for (int k = 0; k < c->n_categories; k++) f->cats[j][k] = text(b, f->cat_text[j][k]);
    for (int64_t i = 0; i < f->t.n_cells; i++) {
        unsigned v = next(b);
        f->ints[j][i] = (int8_t)v * 1000003LL;
        f->numbers[j][i] = v == 255 ? NAN : (int8_t)v / 4.0;
        f->codes[j][i] = (int)(v % (unsigned)(c->n_categories + 1)) - 1; /* -1: missing */
    }
}

static void make_frame(bytes *b, frame *f)
{
    ast_h5ad_table *t = &f->t;
    unsigned shape = next(b);
    *t = (ast_h5ad_table){.n_cells = 1 + shape % MAX_CELLS, .n_genes = 1 + (int)(shape / MAX_CELLS % MAX_GENES),
                          .X = f->X, .genes = f->genes, .cells = f->cells, .obs = f->obs};
    for (int g = 0; g < t->n_genes; g++) f->genes[g] = text(b, f->gene_text[g]);
    for (int64_t i = 0; i < t->n_cells; i++) f->cells[i] = text(b, f->cell_text[i]);
    for (int64_t k = 0; k < t->n_cells * t->n_genes; k++) f->X[k] = (float)(next(b) % 64) / 4; /* counts, exact */
    unsigned layout = next(b);
    int dims = 2 + (layout & 1);
    for (int64_t k = 0; k < t->n_cells * 3; k++) f->spatial[k] = (float)(int8_t)next(b) / 2;
    t->obsm[t->n_obsm++] = (ast_h5ad_matrix){"spatial", f->spatial, dims};
    if (layout & 2) /* a second matrix, named by the input */
        t->obsm[t->n_obsm++] = (ast_h5ad_matrix){text(b, f->obsm_name), f->extra, 2 + (int)(layout >> 2 & 1)};
    if (layout & 8) {
        f->uns[0] = text(b, f->uns_text[0]), f->uns[1] = text(b, f->uns_text[1]), f->uns[2] = NULL;
        t->uns_group = "alphast", t->uns = f->uns;
    }
    t->n_obs = (int)(layout >> 4) % (MAX_OBS + 1);
    for (int j = 0; j < t->n_obs; j++) make_column(b, f, j);
}

static void check_closed(const char *when)
{
    ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    FUZZ_CHECK(open_ids == 0, "%zd HDF5 objects left open %s", open_ids, when);
}

static int same_number(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static void check_column(const ast_h5ad_column *c, const ast_obs_column *got, int64_t n)
{
    FUZZ_CHECK(!strcmp(c->name, got->name), "obs column '%s' reads back as '%s'", c->name, got->name);
    if (c->kind != AST_H5AD_CATEGORY) {
        FUZZ_CHECK(got->kind == AST_OBS_NUMBER, "obs column '%s' of numbers reads back as categories", c->name);
        for (int64_t i = 0; i < n; i++) {
            double want = c->kind == AST_H5AD_INT ? (double)c->ints[i] : c->numbers[i];
            FUZZ_CHECK(same_number(got->numbers[i], want), "obs '%s' of cell %lld: wrote %g, read %g", c->name,
                       (long long)i, want, got->numbers[i]);
        }
        return;
    }
    FUZZ_CHECK(got->kind == AST_OBS_CATEGORY && got->n_categories == c->n_categories,
               "obs column '%s' of %d categories reads back as kind %d with %d", c->name, c->n_categories, got->kind,
               got->n_categories);
    for (int k = 0; k < c->n_categories; k++)
        FUZZ_CHECK(!strcmp(got->categories[k], c->categories[k]), "obs '%s' category %d: wrote '%s', read '%s'",
                   c->name, k, c->categories[k], got->categories[k]);
    for (int64_t i = 0; i < n; i++)
        FUZZ_CHECK(got->codes[i] == c->codes[i], "obs '%s' of cell %lld: wrote code %d, read %d", c->name,
                   (long long)i, c->codes[i], got->codes[i]);
}

static void check_same(const ast_h5ad_table *t, const ast_dataset *d)
{
    fuzz_check_dataset(d, "read back");
    FUZZ_CHECK(d->n_cells == t->n_cells && d->n_genes == t->n_genes && d->coord_dims == t->obsm[0].cols,
               "wrote %lld cells x %d genes in %d dimensions, read %lld x %d in %d", (long long)t->n_cells, t->n_genes,
               t->obsm[0].cols, (long long)d->n_cells, d->n_genes, d->coord_dims);
    for (int g = 0; g < t->n_genes; g++)
        FUZZ_CHECK(!strcmp(d->genes[g], t->genes[g]), "gene %d: wrote '%s', read '%s'", g, t->genes[g], d->genes[g]);
    float row[MAX_GENES];
    for (int64_t i = 0; i < t->n_cells; i++) {
        ast_data_row(d, i, row);
        FUZZ_CHECK(!memcmp(row, t->X + i * t->n_genes, (size_t)t->n_genes * sizeof *row), "X of cell %lld changed",
                   (long long)i);
        FUZZ_CHECK(d->cell_names && !strcmp(d->cell_names[i], t->cells[i]), "cell %lld: wrote '%s', read '%s'",
                   (long long)i, t->cells[i], d->cell_names ? d->cell_names[i] : "(no names)");
        for (int c = 0; c < d->coord_dims; c++)
            FUZZ_CHECK(d->pos[i * 3 + c] == t->obsm[0].data[i * d->coord_dims + c], "cell %lld coordinate %d changed",
                       (long long)i, c);
    }
    FUZZ_CHECK(d->n_obs == t->n_obs, "wrote %d obs columns, read %d", t->n_obs, d->n_obs);
    for (int j = 0; j < t->n_obs; j++) check_column(&t->obs[j], &d->obs[j], t->n_cells);
}

/* The directory holds nothing (a failed write leaves no file behind, its
 * temporary one included). */
static void check_empty(const char *dir)
{
    DIR *d = opendir(dir);
    FUZZ_CHECK(d, "the fuzz directory is gone");
    for (struct dirent *x; (x = readdir(d));)
        FUZZ_CHECK(!strcmp(x->d_name, ".") || !strcmp(x->d_name, ".."), "a failed write left '%s'", x->d_name);
    closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static frame f;
    bytes b = {data, size};
    make_frame(&b, &f);
    char path[4200];
    fuzz_path("out.h5ad", path, sizeof path);
    ast_error e = {""};
    int rc = ast_h5ad_write(path, &f.t, &e);
    check_closed("after the write");
    if (rc < 0) {
        FUZZ_CHECK_ERROR(&e, "ast_h5ad_write");
        FUZZ_CHECK(!strstr(e.msg, "disk full"), "the write failed blaming the disk, which has room: %s", e.msg);
        check_empty(fuzz_dir());
        return 0;
    }
    ast_data_opts o;
    ast_data_opts_default(&o);
    ast_dataset d;
    FUZZ_CHECK(ast_data_read_h5ad_direct(path, &o, &d, &e) == 0, "what the writer wrote does not read: %s", e.msg);
    check_closed("after the read");
    check_same(&f.t, &d);
    ast_dataset_free(&d);
    unlink(path);
    return 0;
}
