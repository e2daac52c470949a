/* The expr_to_pos placement kept for people to look at (placement.csv
 * beside eval.json): each set's placed cells aligned onto the true ones as
 * the RMSD metric aligns them, in the data's units. */
#include <stdlib.h>
#include <string.h>

#include "base/atomic_file.h"
#include "base/csv.h"
#include "model/kabsch.h"
#include "evaluate_internal.h"

/* One set's n placed cells rotated (or reflected) onto its true ones, both
 * centred and scaled back to the data's units. */
static void align_set(const float *truth, const float *pos, int n, float scale, float *true_out, float *placed_out)
{
    double *q = ast_xmalloc((size_t)6 * (n ? n : 1) * sizeof *q), *p = q + 3 * n, r[9];
    for (int i = 0; i < 3 * n; i++) q[i] = truth[i], p[i] = pos[i];
    ast_center_rows3(q, NULL, n);
    ast_center_rows3(p, NULL, n);
    ast_kabsch(p, q, NULL, n, 1, r);
    for (int i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            const double *pi = p + 3 * i;
            true_out[3 * i + a] = (float)(scale * q[3 * i + a]);
            placed_out[3 * i + a] = (float)(scale * (r[a * 3] * pi[0] + r[a * 3 + 1] * pi[1] + r[a * 3 + 2] * pi[2]));
        }
    free(q);
}

void eval_keep_placement(const eval_run *run, const float *pos)
{
    const ast_eval_sets *t = run->truth;
    ast_eval_placement *pl = &run->r->placement;
    size_t cells = (size_t)t->B * t->N;
    pl->B = t->B, pl->N = t->N;
    pl->cells = ast_xmalloc(cells * sizeof *pl->cells);
    memcpy(pl->cells, t->cells, cells * sizeof *pl->cells);
    pl->truth = ast_xcalloc(cells * 3, sizeof *pl->truth);
    pl->placed = ast_xcalloc(cells * 3, sizeof *pl->placed);
    for (int b = 0; b < t->B; b++) {
        size_t at = (size_t)b * t->N * 3;
        align_set(t->pos + at, pos + at, eval_set_cells(t, b), run->sets->pos_scale, pl->truth + at, pl->placed + at);
    }
}

void eval_placement_free(ast_eval_placement *p)
{
    free(p->cells), free(p->truth), free(p->placed);
    memset(p, 0, sizeof *p);
}

typedef struct csv_job {
    const ast_eval_placement *p;
    const ast_dataset *d;
} csv_job;

static void cell_row(FILE *f, const csv_job *j, int b, int64_t at)
{
    const ast_dataset *d = j->d;
    int64_t cell = j->p->cells[at];
    int type = d->cell_type ? d->cell_type[cell] : -1;
    fprintf(f, "%d,", b);
    if (d->cell_names) ast_csv_field(f, d->cell_names[cell]);
    else fprintf(f, "%lld", (long long)cell);
    fputc(',', f);
    ast_csv_field(f, type >= 0 ? d->type_names[type] : "");
    for (int k = 0; k < 3; k++) fprintf(f, ",%.7g", j->p->truth[at * 3 + k]);
    for (int k = 0; k < 3; k++) fprintf(f, ",%.7g", j->p->placed[at * 3 + k]);
    fputc('\n', f);
}

static int fill_csv(FILE *f, void *ud)
{
    const csv_job *j = ud;
    fputs("set,cell,label,true_x,true_y,true_z,placed_x,placed_y,placed_z\n", f);
    for (int b = 0; b < j->p->B; b++)
        for (int i = 0; i < j->p->N; i++) {
            int64_t at = (int64_t)b * j->p->N + i;
            if (j->p->cells[at] >= 0) cell_row(f, j, b, at);
        }
    return ferror(f) ? -1 : 0;
}

int ast_eval_placement_write_csv(const ast_eval_report *r, const ast_dataset *d, const char *path, ast_error *e)
{
    csv_job j = {&r->placement, d};
    return r->placement.B ? ast_atomic_write(path, fill_csv, &j, e) : 0;
}
