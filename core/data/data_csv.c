/* Delimited text input (gzip or plain, through zlib): cells x genes with
 * coordinate columns (LUNA style), or genes x cells with the coordinates
 * in a separate file (the STARmap layout). Separator: tab if the header
 * has one, else comma, else runs of white space. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data_csr.h"
#include "data/data_labels.h"

typedef struct reader {
    gzFile f;
    const char *path;
    long line;
    char *buf;
    size_t cap;
    char sep;      /* '\t', ',' or ' ' (white space) */
    int nonneg;    /* counts: negative values are errors (log-normalisation would make them NaN) */
    int no_coords; /* a table without x and y is cells without coordinates (positions_optional) */
    int no_genes;  /* a table of ids and coordinates alone is cells without genes (expression_optional) */
    const char *label_column; /* cells x genes: the column kept as labels (ast_data_opts.label_column) */
    ast_error *e;  /* where next_line reports a read error */
    int failed;    /* next_line's NULL was a read error, not the end of the file */
} reader;

/* gzgets takes an int size; a longer line is no table alphast can use. */
#define MAX_LINE ((size_t)1 << 30)

/* why: what is wrong with line r->line + 1. */
static char *read_failed(reader *r, const char *why)
{
    ast_error_set(r->e, "%s:%ld: %s", r->path, r->line + 1, why);
    r->failed = 1;
    return NULL;
}

/* gzgets answers NULL both at the end and on an error: a gzip stream cut
 * short is Z_BUF_ERROR ("unexpected end of file"), and without this
 * check the lines before the cut trained as if they were the whole file.
 * zlib may know of the cut before handing out the lines it decoded, so
 * the error names no line. */
static int stream_failed(reader *r)
{
    int err;
    const char *msg = gzerror(r->f, &err);
    if (err == Z_OK || err == Z_STREAM_END) return 0;
    const char *end = strstr(msg, ">: ");
    if (!strncmp(msg, "<fd:", 4) && end) msg = end + 3; /* zlib prefixes its name of the stream, "<fd:N>" */
    ast_error_set(r->e, "%s: read error: %s; the file is truncated or damaged (check it with gzip -t, or copy it "
                  "again)", r->path, err == Z_ERRNO ? strerror(errno) : msg);
    r->failed = 1;
    return 1;
}

/* Next line without its newline, any length; NULL at end of file or, with
 * r->failed set and r->e filled, on a read error. */
static char *next_line(reader *r)
{
    size_t len = 0;
    if (r->failed) return NULL;
    if (!r->buf) r->buf = ast_xmalloc(r->cap = 1 << 16);
    for (;;) {
        z_off_t before = gztell(r->f);
        char *got = gzgets(r->f, r->buf + len, (int)(r->cap - len));
        if (stream_failed(r)) return NULL;
        if (!got) {
            if (!len) return NULL;
            break;
        }
        size_t n = strlen(r->buf + len);
        /* gzgets copies NUL bytes too: strlen would silently glue lines. */
        if ((z_off_t)n != gztell(r->f) - before) return read_failed(r, "a NUL byte: this is not a text table");
        len += n;
        if (len && r->buf[len - 1] == '\n') break;
        if (len + 1 < r->cap) continue; /* end of file without newline: loop ends on NULL */
        if (r->cap >= MAX_LINE) return read_failed(r, "a line longer than 1 GiB");
        r->buf = ast_xrealloc(r->buf, r->cap *= 2);
    }
    while (len && (r->buf[len - 1] == '\n' || r->buf[len - 1] == '\r')) r->buf[--len] = 0;
    r->line++;
    return r->buf;
}

static int is_sep(char sep, char c) { return sep == ' ' ? isspace((unsigned char)c) : c == sep; }

/* The quoted field at p, unquoted in place as RFC 4180 reads it: the
 * separator inside quotes is text ("a,b") and "" is one quote. Sets
 * *after past the closing quote; returns the end of the field's text, or
 * NULL when the quote never closes (a field does not span lines). */
static char *unquote(char *p, char **after)
{
    char *w = p;
    for (p++; *p != '"' || p[1] == '"'; p++) {
        if (!*p) return NULL;
        if (*p == '"') p++;
        *w++ = *p;
    }
    *after = p + 1;
    return w;
}

static int split_failed(const reader *r, int field, const char *why)
{
    ast_error_set(r->e, "%s:%ld: column %d: %s", r->path, r->line, field + 1, why);
    return -1;
}

/* Splits s in place into fields at r->sep, unquoting quoted ones; returns
 * the count, or -1 with r->e set for a quote left open or text after a
 * closing quote. With a real separator, empty fields count ("a,,b" has 3). */
static int split(const reader *r, char *s, char ***fields, int *cap)
{
    char sep = r->sep;
    int n = 0;
    char *p = s;
    if (sep == ' ')
        while (isspace((unsigned char)*p)) p++;
    for (;;) {
        if (sep == ' ' && !*p) break;
        if (n == *cap) *fields = ast_xrealloc(*fields, (size_t)(*cap = *cap ? *cap * 2 : 64) * sizeof **fields);
        char *start = p, *end;
        if (*p == '"') {
            if (!(end = unquote(p, &p)))
                return split_failed(r, n, "a quoted field is not closed; end it with \" on the same line");
            if (*p && !is_sep(sep, *p))
                return split_failed(r, n, "text after the closing quote; quote the whole field and write a quote "
                                          "inside it as \"\"");
        } else {
            while (*p && !is_sep(sep, *p)) p++;
            end = p;
        }
        int more = *p != 0;
        if (sep == ' ')
            while (isspace((unsigned char)*p)) *p++ = 0;
        else if (more)
            *p++ = 0;
        *end = 0;
        (*fields)[n++] = start;
        if (sep != ' ' && !more) break;
    }
    return n;
}

static int parse_number(const reader *r, const char *s, int col, float *out, ast_error *e)
{
    char *end;
    double v = strtod(s, &end);
    while (isspace((unsigned char)*end)) end++;
    if (end == s || *end) {
        ast_error_set(e, "%s:%ld: column %d: expected a number, got '%s'", r->path, r->line, col + 1, s);
        return 0;
    }
    if (!isfinite(v)) {
        ast_error_set(e, "%s:%ld: column %d: value '%s' is not finite; clean the file before training", r->path,
                      r->line, col + 1, s);
        return 0;
    }
    /* Values are stored as float32: one finite as a double may not be (1e39). */
    if (!isfinite((float)v)) {
        ast_error_set(e, "%s:%ld: column %d: value '%s' is beyond float32 (about 3.4e38); clean the file before "
                      "training", r->path, r->line, col + 1, s);
        return 0;
    }
    *out = (float)v;
    return 1;
}

/* An expression value: a number, and a count (not negative) when the
 * reader says so; `gene` and `cell` name the entry (cell may be NULL). */
static int parse_count(const reader *r, const char *s, int col, const char *gene, const char *cell, float *out,
                       ast_error *e)
{
    if (!parse_number(r, s, col, out, e)) return 0;
    if (r->nonneg && *out < 0.0f) {
        ast_error_set(e, "%s:%ld: column %d (gene '%s'%s%s%s): count %s is negative; expression must be raw "
                      "counts (or set data.preprocessing.log_normalize: false for values already normalised)",
                      r->path, r->line, col + 1, gene, cell ? ", cell '" : "", cell ? cell : "", cell ? "'" : "", s);
        return 0;
    }
    return 1;
}

static int open_reader(reader *r, const char *path, ast_error *e)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->e = e;
    int fd = ast_open_regular(path, e);
    if (fd < 0) return 0;
    r->f = gzdopen(fd, "rb");
    if (!r->f) {
        ast_error_set(e, "%s: cannot open for reading: %s", path, strerror(errno));
        close(fd);
    }
    return r->f != NULL;
}

static void close_reader(reader *r)
{
    if (r->f) gzclose(r->f);
    free(r->buf);
}

static char detect_sep(const char *header)
{
    return strchr(header, '\t') ? '\t' : strchr(header, ',') ? ',' : ' ';
}

static int is_coord_name(const char *s)
{
    static const char *names[] = {"x", "y", "z", "X", "Y", "Z", "x_coord", "y_coord", "z_coord"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(s, names[i])) return (int)(i % 3) + 1;
    return 0;
}

/* Appends a copy of s to a growing list of names. */
static void push_name(char ***names, int64_t *n, const char *s)
{
    if ((*n & (*n - 1)) == 0) *names = ast_xrealloc(*names, (size_t)(*n ? 2 * *n : 1) * sizeof **names);
    (*names)[(*n)++] = s ? ast_xstrdup(s) : NULL;
}

static void free_names(char **names, int64_t n)
{
    for (int64_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Appends one row of floats to a growing matrix (the coordinates). */
typedef struct rows {
    float *v;
    int64_t n, cap; /* in floats */
} rows;

static float *grow(rows *m, int64_t add)
{
    /* Never NULL + offset, even for add = 0 (undefined behaviour, UBSan). */
    if (!m->v || m->n + add > m->cap)
        m->v = ast_xrealloc(m->v, (size_t)(m->cap = (m->n + add) * 2 + 1) * sizeof(float));
    float *p = m->v + m->n;
    m->n += add;
    return p;
}

static int is_number(const char *s)
{
    char *end;
    strtod(s, &end);
    return end != s && !*end;
}

/* The columns of a cells x genes header. */
typedef struct table {
    char **header;
    int nh;
    int coord_col[3]; /* x, y, z; -1: none */
    int id_col;       /* 1 if column 1 holds cell ids */
    int *gene_col;
    char **genes;
    int ng;
    char **cells; /* the ids of column 1, when it holds them */
    int64_t n_cells;
    int label_col;  /* the label column; -1: none */
    char **labels;  /* its values, NULL for an empty field */
    int64_t n_labels;
    float *row;   /* one row's genes, dense, before it joins the sparse matrix */
} table;

static void table_free(table *tb)
{
    for (int i = 0; i < tb->nh; i++) free(tb->header[i]);
    for (int g = 0; tb->genes && g < tb->ng; g++) free(tb->genes[g]);
    free(tb->header), free(tb->genes), free(tb->gene_col), free(tb->row);
    free_names(tb->cells, tb->n_cells);
    free_names(tb->labels, tb->n_labels);
}

/* x and y columns, maybe z; a second column of one coordinate (x twice,
 * or x and X) would silently replace the first. */
static int find_coords(const reader *r, table *tb, ast_error *e)
{
    for (int i = 0; i < tb->nh; i++) {
        int c = is_coord_name(tb->header[i]) - 1, was = c >= 0 ? tb->coord_col[c] : -1;
        if (was >= 0) {
            ast_error_set(e, "%s:1: column %d ('%s') repeats the coordinate of column %d ('%s'); keep one x, one y "
                          "and at most one z column (rename or drop the other)", r->path, i + 1, tb->header[i],
                          was + 1, tb->header[was]);
            return -1;
        }
        if (c >= 0) tb->coord_col[c] = i;
    }
    if (r->no_coords && tb->coord_col[0] < 0 && tb->coord_col[1] < 0 && tb->coord_col[2] < 0) return 0;
    if (tb->coord_col[0] < 0 || tb->coord_col[1] < 0) {
        ast_error_set(e, "%s:1: no x and y columns in the header; name the coordinate columns x, y (and z)", r->path);
        return -1;
    }
    return 0;
}

/* The first row decides whether column 1 is an id (not a number); every
 * other column that is not a coordinate is a gene. */
static int pick_genes(const reader *r, table *tb, char **f, ast_error *e)
{
    const int *cc = tb->coord_col;
    tb->id_col = cc[0] != 0 && cc[1] != 0 && cc[2] != 0 && !is_number(f[0]);
    for (int i = 0; i < tb->nh; i++)
        if (i != cc[0] && i != cc[1] && i != cc[2] && i != tb->label_col && (i > 0 || !tb->id_col))
            tb->gene_col[tb->ng] = i, tb->genes[tb->ng++] = ast_xstrdup(tb->header[i]);
    if (!tb->ng && !r->no_genes)
        ast_error_set(e, "%s:1: no gene columns, only coordinates%s; add the expression columns", r->path,
                      tb->id_col ? " and cell ids" : "");
    return tb->ng > 0 || r->no_genes;
}

/* One row's genes, coordinates and cell id. */
static int read_row(const reader *r, char **f, table *tb, ast_csr_builder *ex, rows *po, ast_error *e)
{
    float *p = grow(po, 3);
    const char *cell = tb->id_col ? f[0] : NULL;
    if (cell) push_name(&tb->cells, &tb->n_cells, cell);
    if (tb->label_col >= 0) push_name(&tb->labels, &tb->n_labels, f[tb->label_col][0] ? f[tb->label_col] : NULL);
    for (int g = 0; g < tb->ng; g++)
        if (!parse_count(r, f[tb->gene_col[g]], tb->gene_col[g], tb->genes[g], cell, &tb->row[g], e)) return 0;
    ast_csr_append_dense(ex, tb->row, tb->ng);
    p[0] = p[1] = p[2] = 0.0f;
    for (int c = 0; c < 3; c++)
        if (tb->coord_col[c] >= 0 && !parse_number(r, f[tb->coord_col[c]], tb->coord_col[c], &p[c], e)) return 0;
    return 1;
}

/* The label column as the dataset's one obs column, of categories. */
static void labels_as_obs(const table *tb, ast_dataset *d)
{
    d->obs = ast_xcalloc(1, sizeof *d->obs);
    d->n_obs = 1;
    ast_obs_column *c = &d->obs[0];
    c->name = ast_xstrdup(tb->header[tb->label_col]);
    c->kind = AST_OBS_CATEGORY;
    c->codes = ast_labels_of_strings(tb->labels, tb->n_labels, &c->categories, &c->n_categories);
}

/* cells x genes: the header names the columns; x/y/z columns are the
 * coordinates, a first column holding non-numbers is the cell id, every
 * other column is a gene. */
static int read_cells_by_genes(reader *r, ast_dataset *d, ast_error *e)
{
    char **f = NULL, *line = next_line(r);
    int cap = 0, ok = 0;
    if (!line) {
        if (!r->failed) ast_error_set(e, "%s: empty file", r->path);
        return 0;
    }
    r->sep = detect_sep(line);
    table tb = {.coord_col = {-1, -1, -1}, .label_col = -1};
    if ((tb.nh = split(r, line, &f, &cap)) < 0) {
        free(f);
        return 0;
    }
    tb.header = ast_xcalloc((size_t)tb.nh + 1, sizeof *tb.header);
    tb.genes = ast_xcalloc((size_t)tb.nh + 1, sizeof *tb.genes);
    tb.gene_col = ast_xcalloc((size_t)tb.nh + 1, sizeof *tb.gene_col);
    tb.row = ast_xcalloc((size_t)tb.nh + 1, sizeof *tb.row);
    for (int i = 0; i < tb.nh; i++) tb.header[i] = ast_xstrdup(f[i]);
    ast_csr_builder ex = {{0}, 0, 0, 0};
    rows po = {0};
    if (find_coords(r, &tb, e) < 0) goto done;
    for (int i = 0; r->label_column && i < tb.nh; i++)
        if (!strcmp(tb.header[i], r->label_column)) tb.label_col = i;
    while ((line = next_line(r))) {
        if (!*line) continue;
        int n = split(r, line, &f, &cap);
        if (n < 0) goto done;
        if (n != tb.nh) {
            ast_error_set(e, "%s:%ld: %d fields, but the header has %d", r->path, r->line, n, tb.nh);
            goto done;
        }
        if ((!tb.ng && !pick_genes(r, &tb, f, e)) || !read_row(r, f, &tb, &ex, &po, e)) goto done;
    }
    if (r->failed) goto done;
    d->coord_dims = tb.coord_col[0] < 0 ? 0 : tb.coord_col[2] >= 0 ? 3 : 2;
    d->n_cells = po.n / 3;
    d->n_genes = tb.ng;
    d->x = ex.m, d->pos = po.v, d->genes = tb.genes, d->cell_names = tb.cells;
    if (tb.label_col >= 0) labels_as_obs(&tb, d);
    memset(&ex, 0, sizeof ex);
    po.v = NULL, tb.genes = NULL, tb.cells = NULL, tb.n_cells = 0;
    ok = 1;
done:
    table_free(&tb);
    ast_csr_free(&ex.m);
    free(po.v), free(f);
    return ok;
}

/* genes x cells: line 1 = cell ids; each next line = gene name + counts. */
static int read_genes_by_cells(reader *r, ast_dataset *d, ast_error *e)
{
    char **f = NULL;
    int cap = 0;
    char *line = next_line(r);
    if (!line) {
        if (!r->failed) ast_error_set(e, "%s: empty file", r->path);
        return 0;
    }
    r->sep = detect_sep(line);
    int64_t cells = split(r, line, &f, &cap), n_names = 0;
    ast_csr_builder t = {{0}, 0, 0, 0}; /* genes x cells: X by column */
    float *x = ast_xmalloc((size_t)(cells > 0 ? cells : 1) * sizeof *x);
    char **genes = NULL, **names = NULL;
    int ng = 0;
    if (cells < 0) goto fail;
    if (cells < 1 || (cells == 1 && !*f[0])) {
        ast_error_set(e, "%s:1: line 1 names no cells; the genes x cells layout starts with a line of cell ids",
                      r->path);
        goto fail;
    }
    for (int64_t c = 0; c < cells; c++) push_name(&names, &n_names, f[c]);
    while ((line = next_line(r))) {
        if (!*line) continue;
        int n = split(r, line, &f, &cap);
        if (n < 0) goto fail;
        if (n != cells + 1) {
            ast_error_set(e, "%s:%ld: gene row has %d counts, but line 1 names %lld cells", r->path, r->line, n - 1,
                          (long long)cells);
            goto fail;
        }
        genes = ast_xrealloc(genes, (size_t)(ng + 1) * sizeof *genes);
        genes[ng++] = ast_xstrdup(f[0]);
        for (int64_t c = 0; c < cells; c++)
            if (!parse_count(r, f[c + 1], (int)c + 1, f[0], NULL, &x[c], e)) goto fail;
        ast_csr_append_dense(&t, x, (int)cells);
    }
    if (r->failed) goto fail;
    if (!ng) {
        ast_error_set(e, "%s: no gene rows after line 1; the genes x cells layout has one line per gene", r->path);
        goto fail;
    }
    d->n_cells = cells, d->n_genes = ng, d->genes = genes, d->cell_names = names;
    ast_csr_from_csc(&t.m, cells, ng, &d->x);
    free(x), free(f);
    return 1;
fail:
    for (int g = 0; g < ng; g++) free(genes[g]);
    free_names(names, n_names);
    ast_csr_free(&t.m);
    free(genes), free(x), free(f);
    return 0;
}

static int read_coords_file(const char *path, ast_dataset *d, ast_error *e)
{
    reader r;
    if (!open_reader(&r, path, e)) return 0;
    char **f = NULL, *line;
    int cap = 0, ok = 1;
    int64_t i = 0;
    d->pos = ast_xcalloc((size_t)d->n_cells * 3, sizeof(float));
    while (ok && (line = next_line(&r))) {
        if (!*line) continue;
        if (!r.sep) r.sep = detect_sep(line);
        int n = split(&r, line, &f, &cap);
        if (n < 0) {
            ok = 0;
        } else if (i >= d->n_cells) {
            ast_error_set(e, "%s:%ld: more coordinate rows than the %lld cells of the expression file", path, r.line,
                          (long long)d->n_cells);
            ok = 0;
        } else if (n < 2 || n > 3) {
            ast_error_set(e, "%s:%ld: expected 2 or 3 coordinates (x y [z]), got %d fields", path, r.line, n);
            ok = 0;
        }
        for (int c = 0; ok && c < n; c++) ok = parse_number(&r, f[c], c, &d->pos[i * 3 + c], e);
        d->coord_dims = n;
        i++;
    }
    ok = ok && !r.failed;
    if (ok && i != d->n_cells) {
        ast_error_set(e, "%s: %lld coordinate rows for %lld cells", path, (long long)i, (long long)d->n_cells);
        ok = 0;
    }
    free(f);
    close_reader(&r);
    return ok;
}

int ast_data_read_csv(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e)
{
    reader r;
    memset(out, 0, sizeof *out);
    if (!open_reader(&r, path, e)) return -1;
    r.nonneg = o->log_normalize;
    r.no_coords = o->positions_optional;
    r.no_genes = o->expression_optional;
    r.label_column = o->label_column;
    int ok = o->genes_by_cells ? read_genes_by_cells(&r, out, e) : read_cells_by_genes(&r, out, e);
    close_reader(&r);
    if (ok && out->n_cells < 1) {
        ast_error_set(e, "%s: no cells", path);
        ok = 0;
    }
    if (ok && o->genes_by_cells) {
        if (!o->coords_file && o->positions_optional) {
            out->pos = ast_xcalloc((size_t)out->n_cells * 3, sizeof(float)); /* coord_dims 0: none */
        } else if (!o->coords_file) {
            ast_error_set(e, "%s: genes x cells layout needs a coordinate file (data.coords_file)", path);
            ok = 0;
        } else {
            ok = read_coords_file(o->coords_file, out, e);
        }
    }
    if (ok) {
        out->slice = ast_xcalloc((size_t)out->n_cells, sizeof *out->slice);
        out->n_slices = 1;
        out->source = ast_xstrdup(path);
    } else {
        ast_dataset_free(out);
    }
    return ok ? 0 : -1;
}

int ast_data_read(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e)
{
    size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".h5ad")) return ast_data_read_h5ad(path, o, out, e);
    return ast_data_read_csv(path, o, out, e);
}
