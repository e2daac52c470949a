/* alphast/report.h: the ablation report of a sweep directory (as written by
 * `alphast-run sweep`): per config the cost (parameters, step time, memory),
 * loss curves, training losses and evaluation metrics as mean ± sd over
 * seeds next to the evaluation's baselines, each config's differences from
 * a reference config (bootstrap interval, Welch p, Holm-adjusted p over
 * every test of the report, minimum detectable difference), monitor
 * summaries and a verdict derived from those numbers that claims only what
 * survives Holm's correction. Failed and unfinished runs are listed, never
 * dropped. docs/report.md has the statistics. */
#ifndef ALPHAST_REPORT_H
#define ALPHAST_REPORT_H

#include "engine/engine.h"

typedef struct ast_report_opts {
    const char *out_dir;  /* where report.md/.html and the SVGs go; NULL: the sweep directory */
    const char *baseline; /* the reference config, which the others are compared with (--baseline);
                             NULL: "Baseline" if present, else the first. Not one of eval.json's baselines. */
} ast_report_opts;

/* Reads SWEEP_DIR/ledger.jsonl and the run directories it names, and writes
 * report.md (+ report_*.svg next to it) and report.html (one self-contained
 * file, plots inline). Returns 0, or -1 with e set. */
int ast_report_write(const char *sweep_dir, const ast_report_opts *o, ast_error *e);

#endif
