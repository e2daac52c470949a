/* ast_report_write: read the sweep, draw the plots once, write report.md
 * with its SVG files and the self-contained report.html. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "base/atomic_file.h"
#include "report_internal.h"

typedef struct doc_job {
    const rp_sweep *s;
    const rp_figures *figs;
    int html;
} doc_job;

static int write_doc(FILE *out, void *ud)
{
    const doc_job *j = ud;
    char title[512];
    snprintf(title, sizeof title, "Ablation report: %s", j->s->name);
    rp_doc d = {out, j->html};
    rp_doc_begin(&d, title);
    rp_body(&d, j->s, j->figs);
    rp_doc_end(&d);
    return ferror(out) ? -1 : 0;
}

static int write_in(const char *dir, const char *file, ast_write_fn fill, void *ud, ast_error *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return ast_atomic_write(path, fill, ud, e);
}

/* Each figure's SVG and, beside it, its numbers as CSV. */
static int write_figures(const char *dir, const rp_figures *f, ast_error *e)
{
    char path[4096], csv[512];
    for (int i = 0; i < f->n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, f->v[i].file);
        if (ast_atomic_write_bytes(path, f->v[i].svg_file, strlen(f->v[i].svg_file), e) < 0) return -1;
        snprintf(path, sizeof path, "%s/%s", dir, rp_figure_csv_file(&f->v[i], csv, sizeof csv));
        if (ast_atomic_write_bytes(path, f->v[i].csv, strlen(f->v[i].csv), e) < 0) return -1;
    }
    return 0;
}

static int ensure_dir(const char *dir, ast_error *e)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) return 0;
    ast_error_set(e, "%s: cannot create the report directory: %s", dir, strerror(errno));
    return -1;
}

int ast_report_write(const char *sweep_dir, const ast_report_opts *o, ast_error *e)
{
    const char *out = o && o->out_dir ? o->out_dir : sweep_dir;
    rp_sweep s;
    rp_figures figs = {0};
    int rc = rp_sweep_load(&s, sweep_dir, o ? o->baseline : NULL, e);
    if (rc == 0) {
        rp_figures_make(&s, &figs);
        doc_job md = {&s, &figs, 0}, html = {&s, &figs, 1};
        rc = ensure_dir(out, e) < 0 || write_figures(out, &figs, e) < 0 ||
                     write_in(out, "report.md", write_doc, &md, e) < 0 ||
                     write_in(out, "report.html", write_doc, &html, e) < 0
                 ? -1
                 : 0;
    }
    rp_figures_free(&figs);
    rp_sweep_free(&s);
    return rc;
}
