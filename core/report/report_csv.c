/* The numbers each figure draws, as CSV beside its SVG (report_<name>.csv):
 * to re-plot, check or quote them without reading coordinates off a picture. */
#include <math.h>
#include <string.h>

#include "base/csv.h"
#include "report_internal.h"

const char *rp_figure_csv_file(const rp_figure *fig, char *buf, size_t n)
{
    size_t stem = strlen(fig->file) - (strlen(fig->file) > 4 ? 4 : 0); /* without ".svg" */
    snprintf(buf, n, "%.*s.csv", (int)stem, fig->file);
    return buf;
}

static void row(FILE *f, const char *config, const char *series, double step, double value)
{
    ast_csv_field(f, config);
    fputc(',', f);
    ast_csv_field(f, series);
    fprintf(f, ",%.10g,%.10g\n", step, value);
}

static void band_rows(FILE *f, const rp_line *l)
{
    const rp_band *b = l->band;
    for (int i = 0; i < b->n; i++) row(f, l->label, "mean", b->x[i], b->mean[i]);
    for (int i = 0; i < b->n; i++) row(f, l->label, "min", b->x[i], b->lo[i]);
    for (int i = 0; i < b->n; i++) row(f, l->label, "max", b->x[i], b->hi[i]);
}

char *rp_csv_plot(const rp_line *lines, int n_lines)
{
    char *out = NULL, series[64];
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    fputs("config,series,step,value\n", f);
    for (int l = 0; l < n_lines; l++) {
        const rp_line *ln = &lines[l];
        band_rows(f, ln);
        for (int k = 0; k < ln->n_seeds; k++) {
            snprintf(series, sizeof series, "seed %lld", ln->seed[k]);
            for (int i = 0; i < ln->seeds[k].n; i++) row(f, ln->label, series, ln->seeds[k].x[i], ln->seeds[k].mean[i]);
        }
        for (int k = 0; ln->best_x && k < ln->n_seeds; k++) {
            snprintf(series, sizeof series, "best, seed %lld", ln->seed[k]);
            if (isfinite(ln->best_y[k])) row(f, ln->label, series, ln->best_x[k], ln->best_y[k]);
        }
    }
    fclose(f);
    return out;
}

char *rp_csv_panels(const rp_panel *panels, int n)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    fputs("panel,series,kind,value\n", f);
    for (int p = 0; p < n; p++) {
        const rp_panel *pn = &panels[p];
        for (int c = 0; c < pn->n_cols; c++) {
            const rp_dots *d = &pn->cols[c];
            double lo, hi;
            rp_mean_interval(d->v, d->n, &lo, &hi);
            const char *kind[] = {"mean", "ci_low", "ci_high"};
            double value[] = {rp_stat_values(d->v, d->n).mean, lo, hi};
            for (int i = 0; i < d->n + 3; i++) {
                ast_csv_field(f, pn->title), fputc(',', f), ast_csv_field(f, d->label);
                fprintf(f, ",%s,%.10g\n", i < d->n ? "seed" : kind[i - d->n], i < d->n ? d->v[i] : value[i - d->n]);
            }
        }
        for (int b = 0; b < pn->n_lines; b++) {
            ast_csv_field(f, pn->title), fputc(',', f), ast_csv_field(f, pn->lines[b].label);
            fprintf(f, ",baseline,%.10g\n", pn->lines[b].y);
        }
    }
    fclose(f);
    return out;
}

char *rp_csv_routing(const rp_routing_grid *g, int n)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    fputs("config,seed,layer,expert,bucket,share\n", f);
    for (int i = 0; i < n; i++)
        for (int r = 0; r < g[i].runs; r++)
            for (int l = 0; l < g[i].layers; l++)
                for (int e = 0; e < g[i].experts; e++)
                    for (int b = 0; b < g[i].buckets; b++) {
                        ast_csv_field(f, g[i].config);
                        fprintf(f, ",%lld,%d,%d,%d,%.10g\n", g[i].seed[r], l, e, b, rp_routing_share(&g[i], r, l, e, b));
                    }
    fclose(f);
    return out;
}
