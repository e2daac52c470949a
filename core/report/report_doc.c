/* The report's two formats behind one writer: Markdown (plots as separate
 * SVG files next to it) and one self-contained HTML page (plots inline,
 * styles inline, no scripts, nothing fetched). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

void rp_table_init(rp_table *t, int n_cols) { *t = (rp_table){.n_cols = n_cols}; }

void rp_table_cell(rp_table *t, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t->cells = ast_xrealloc(t->cells, (size_t)(t->n_cells + 1) * sizeof *t->cells);
    t->cells[t->n_cells++] = ast_xstrdup(buf);
}

void rp_table_free(rp_table *t)
{
    for (int i = 0; i < t->n_cells; i++) free(t->cells[i]);
    free(t->cells);
}

/* Tables and figures may use the page's 1200 px; prose stays narrower, to be read. */
static const char *const css =
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}"
    "p,li{max-width:900px}.wide{overflow-x:auto}table{border-collapse:collapse;margin:1em 0;font-size:14px}"
    "th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}th.n{text-align:right}"
    "td.n{text-align:right;white-space:nowrap}"
    "th{background:#f3f3f3}figure{margin:1.5em 0}figure svg{max-width:100%;height:auto}"
    "figcaption{color:#555;font-size:90%;max-width:900px}"
    ".lead{font-size:110%;background:#f3f6fa;border-left:4px solid #0072B2;padding:.5em .8em}";

void rp_doc_begin(rp_doc *d, const char *title)
{
    if (!d->html) {
        fprintf(d->f, "# %s\n\n", title);
        return;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", d->f);
    rp_put_escaped(d->f, title);
    fprintf(d->f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", css);
    rp_put_escaped(d->f, title);
    fputs("</h1>\n", d->f);
}

void rp_doc_end(rp_doc *d)
{
    if (d->html) fputs("</body>\n</html>\n", d->f);
}

void rp_doc_heading(rp_doc *d, int level, const char *text)
{
    if (!d->html) {
        fprintf(d->f, "%.*s %s\n\n", level, "######", text);
        return;
    }
    fprintf(d->f, "<h%d>", level);
    rp_put_escaped(d->f, text);
    fprintf(d->f, "</h%d>\n", level);
}

void rp_doc_para(rp_doc *d, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!d->html) {
        fprintf(d->f, "%s\n\n", buf);
        return;
    }
    fputs("<p>", d->f);
    rp_put_escaped(d->f, buf);
    fputs("</p>\n", d->f);
}

void rp_doc_lead(rp_doc *d, const char *label, const char *text)
{
    if (!d->html) {
        fprintf(d->f, "**%s** %s\n\n", label, text);
        return;
    }
    fputs("<p class=\"lead\"><strong>", d->f);
    rp_put_escaped(d->f, label);
    fputs("</strong> ", d->f);
    rp_put_escaped(d->f, text);
    fputs("</p>\n", d->f);
}

void rp_doc_list(rp_doc *d, const ast_strlist *items)
{
    if (d->html) fputs("<ul>\n", d->f);
    for (int i = 0; i < items->n; i++) {
        fputs(d->html ? "<li>" : "- ", d->f);
        if (d->html) rp_put_escaped(d->f, items->v[i]);
        else fputs(items->v[i], d->f);
        fputs(d->html ? "</li>\n" : "\n", d->f);
    }
    fputs(d->html ? "</ul>\n" : "\n", d->f);
}

static void md_cell(FILE *f, const char *s)
{
    fputs(" ", f);
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputs(" |", f);
}

/* Whether a cell holds a number ("0.412 ± 0.010", "+0.031", "[-0.01, +0.05]", "< 0.001", "n/a"): such
 * columns are right-aligned, so the digits line up, and never wrapped. */
static int numeric(const char *cell) { return (cell[0] && strchr("0123456789+-[<.", cell[0])) || !strcmp(cell, "n/a"); }

/* A column's alignment goes by its first row. */
static int numeric_column(const rp_table *t, int col)
{
    return col > 0 && t->n_cells > t->n_cols + col && numeric(t->cells[t->n_cols + col]);
}

static void table_md(FILE *f, const rp_table *t)
{
    for (int i = 0; i < t->n_cells; i++) {
        if (i % t->n_cols == 0) fputc('|', f);
        md_cell(f, t->cells[i]);
        if (i % t->n_cols == t->n_cols - 1) fputc('\n', f);
        if (i == t->n_cols - 1) {
            fputc('|', f);
            for (int c = 0; c < t->n_cols; c++) fputs(numeric_column(t, c) ? " ---: |" : " --- |", f);
            fputc('\n', f);
        }
    }
    fputc('\n', f);
}

static void table_html(FILE *f, const rp_table *t)
{
    fputs("<div class=\"wide\"><table>\n", f);
    for (int i = 0; i < t->n_cells; i++) {
        const char *tag = i < t->n_cols ? "th" : "td";
        if (i % t->n_cols == 0) fputs("<tr>", f);
        fprintf(f, numeric_column(t, i % t->n_cols) ? "<%s class=\"n\">" : "<%s>", tag);
        rp_put_escaped(f, t->cells[i]);
        fprintf(f, "</%s>", tag);
        if (i % t->n_cols == t->n_cols - 1) fputs("</tr>\n", f);
    }
    fputs("</table></div>\n", f);
}

void rp_doc_table(rp_doc *d, const rp_table *t)
{
    if (d->html) table_html(d->f, t);
    else table_md(d->f, t);
}

/* The page links nothing (it is mailed alone), so the CSV beside the
 * figure is named, not linked; Markdown links it. */
void rp_doc_figure(rp_doc *d, const rp_figure *fig)
{
    char csv[512];
    rp_figure_csv_file(fig, csv, sizeof csv);
    if (!d->html) {
        fprintf(d->f, "![%s](%s)\n\n[Data: %s](%s)\n\n", fig->caption, fig->file, csv, csv);
        return;
    }
    fprintf(d->f, "<figure>\n%s<figcaption>", fig->svg);
    rp_put_escaped(d->f, fig->caption);
    fprintf(d->f, " Data: %s, beside report.html.</figcaption>\n</figure>\n", csv);
}
