/* Delimited text input (gzip or plain, through zlib): cells x genes with
 * coordinate columns (LUNA style), or genes x cells with the coordinates
 * in a separate file (the STARmap layout). Separator: tab if the header
 * has one, else comma, else runs of white space. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/data.h"

typedef struct reader {
    gzFile f;
    const char *path;
    long line;
    char *buf;
    size_t cap;
    char sep; /* '\t', ',' or ' ' (white space) */
} reader;

/* Next line without its newline, any length; NULL at end of file. */
static char *next_line(reader *r)
{
    size_t len = 0;
    if (!r->buf) r->buf = ast_xmalloc(r->cap = 1 << 16);
    for (;;) {
        if (!gzgets(r->f, r->buf + len, (int)(r->cap - len))) {
            if (!len) return NULL;
            break;
        }
        len += strlen(r->buf + len);
        if (len && r->buf[len - 1] == '\n') break;
        if (len + 1 < r->cap) continue; /* end of file without newline: loop ends on NULL */
        r->buf = ast_xrealloc(r->buf, r->cap *= 2);
    }
    while (len && (r->buf[len - 1] == '\n' || r->buf[len - 1] == '\r')) r->buf[--len] = 0;
    r->line++;
    return r->buf;
}

/* Splits s in place into fields, stripping surrounding quotes; returns
 * the count. With a real separator, empty fields count ("a,,b" has 3). */
static int split(char *s, char sep, char ***fields, int *cap)
{
    int n = 0;
    char *p = s;
    if (sep == ' ')
        while (isspace((unsigned char)*p)) p++;
    for (;;) {
        if (sep == ' ' && !*p) break;
        if (n == *cap) *fields = ast_xrealloc(*fields, (size_t)(*cap = *cap ? *cap * 2 : 64) * sizeof **fields);
        char *start = p;
        while (*p && (sep == ' ' ? !isspace((unsigned char)*p) : *p != sep)) p++;
        char *end = p;
        int more = *p != 0;
        if (sep == ' ')
            while (isspace((unsigned char)*p)) *p++ = 0;
        else if (more)
            *p++ = 0;
        *end = 0;
        if (*start == '"' && end > start + 1 && end[-1] == '"') {
            start++;
            end[-1] = 0;
        }
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
    *out = (float)v;
    return 1;
}

static int open_reader(reader *r, const char *path, ast_error *e)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->f = gzopen(path, "rb");
    if (!r->f) ast_error_set(e, "%s: cannot open for reading", path);
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

/* Appends one row of floats to a growing matrix. */
typedef struct rows {
    float *v;
    int64_t n, cap; /* in floats */
} rows;

static float *grow(rows *m, int64_t add)
{
    if (m->n + add > m->cap) m->v = ast_xrealloc(m->v, (size_t)(m->cap = (m->n + add) * 2) * sizeof(float));
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

/* cells x genes: the header names the columns; x/y/z columns are the
 * coordinates, a first column holding non-numbers is the cell id, every
 * other column is a gene. */
static int read_cells_by_genes(reader *r, ast_dataset *d, ast_error *e)
{
    char **f = NULL, *line = next_line(r);
    int cap = 0, ok = 0, ng = 0, nh, first = 1;
    if (!line) {
        ast_error_set(e, "%s: empty file", r->path);
        return 0;
    }
    r->sep = detect_sep(line);
    nh = split(line, r->sep, &f, &cap);
    int coord_col[3] = {-1, -1, -1}, *gene_col = ast_xcalloc((size_t)nh, sizeof(int));
    char **header = ast_xcalloc((size_t)nh, sizeof *header), **genes = ast_xcalloc((size_t)nh, sizeof *genes);
    for (int i = 0; i < nh; i++) {
        header[i] = ast_xstrdup(f[i]);
        int c = is_coord_name(f[i]);
        if (c) coord_col[c - 1] = i;
    }
    rows ex = {0}, po = {0};
    if (coord_col[0] < 0 || coord_col[1] < 0) {
        ast_error_set(e, "%s:1: no x and y columns in the header; name the coordinate columns x, y (and z)", r->path);
        goto done;
    }
    while ((line = next_line(r))) {
        if (!*line) continue;
        int n = split(line, r->sep, &f, &cap);
        if (n != nh) {
            ast_error_set(e, "%s:%ld: %d fields, but the header has %d", r->path, r->line, n, nh);
            goto done;
        }
        if (first) { /* the first row decides whether column 1 is an id */
            for (int i = 0; i < nh; i++)
                if (i != coord_col[0] && i != coord_col[1] && i != coord_col[2] && (i > 0 || is_number(f[0])))
                    gene_col[ng] = i, genes[ng++] = ast_xstrdup(header[i]);
            first = 0;
        }
        float *x = grow(&ex, ng), *p = grow(&po, 3);
        for (int g = 0; g < ng; g++)
            if (!parse_number(r, f[gene_col[g]], gene_col[g], &x[g], e)) goto done;
        p[2] = 0.0f;
        d->coord_dims = coord_col[2] >= 0 ? 3 : 2;
        for (int c = 0; c < 3; c++)
            if (coord_col[c] >= 0 && !parse_number(r, f[coord_col[c]], coord_col[c], &p[c], e)) goto done;
    }
    d->n_cells = po.n / 3;
    d->n_genes = ng;
    d->expr = ex.v, d->pos = po.v, d->genes = genes;
    ex.v = po.v = NULL, genes = NULL;
    ok = 1;
done:
    for (int i = 0; i < nh; i++) free(header[i]);
    if (genes)
        for (int g = 0; g < ng; g++) free(genes[g]);
    free(header), free(genes), free(gene_col), free(ex.v), free(po.v), free(f);
    return ok;
}

/* genes x cells: line 1 = cell ids; each next line = gene name + counts. */
static int read_genes_by_cells(reader *r, ast_dataset *d, ast_error *e)
{
    char **f = NULL;
    int cap = 0;
    char *line = next_line(r);
    if (!line) {
        ast_error_set(e, "%s: empty file", r->path);
        return 0;
    }
    r->sep = detect_sep(line);
    int64_t cells = split(line, r->sep, &f, &cap);
    rows t = {0};
    char **genes = NULL;
    int ng = 0;
    while ((line = next_line(r))) {
        if (!*line) continue;
        int n = split(line, r->sep, &f, &cap);
        if (n != cells + 1) {
            ast_error_set(e, "%s:%ld: gene row has %d counts, but line 1 names %lld cells", r->path, r->line, n - 1,
                          (long long)cells);
            goto fail;
        }
        genes = ast_xrealloc(genes, (size_t)(ng + 1) * sizeof *genes);
        genes[ng++] = ast_xstrdup(f[0]);
        float *x = grow(&t, cells);
        for (int64_t c = 0; c < cells; c++)
            if (!parse_number(r, f[c + 1], (int)c + 1, &x[c], e)) goto fail;
    }
    d->n_cells = cells, d->n_genes = ng, d->genes = genes;
    d->expr = ast_xmalloc((size_t)(cells * ng) * sizeof(float));
    for (int g = 0; g < ng; g++) /* transpose to cells x genes */
        for (int64_t c = 0; c < cells; c++) d->expr[c * ng + g] = t.v[(int64_t)g * cells + c];
    free(t.v), free(f);
    return 1;
fail:
    for (int g = 0; g < ng; g++) free(genes[g]);
    free(genes), free(t.v), free(f);
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
        int n = split(line, r.sep, &f, &cap);
        if (i >= d->n_cells) {
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
    int ok = o->genes_by_cells ? read_genes_by_cells(&r, out, e) : read_cells_by_genes(&r, out, e);
    close_reader(&r);
    if (ok && out->n_cells < 1) {
        ast_error_set(e, "%s: no cells", path);
        ok = 0;
    }
    if (ok && o->genes_by_cells) {
        if (!o->coords_file) {
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
