/* Choosing OpenBLAS's kernels: an OpenBLAS older than the CPU (Debian 12's
 * 0.3.21 on a 5th-generation Xeon, family 6 model 207) does not recognise
 * it and falls back to its generic Prescott kernels, 3-8x slower at sgemm.
 * OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so alphast-run
 * checks at start and, when the kernels are older than the CPU's
 * features allow, runs itself again with OPENBLAS_CORETYPE set (issue 13). */
#ifndef ALPHAST_BLAS_CORETYPE_H
#define ALPHAST_BLAS_CORETYPE_H

#include <stddef.h>

/* The OpenBLAS core type to ask for, given the core OpenBLAS chose and the
 * CPU's feature flags (as in /proc/cpuinfo's "flags" line, space
 * separated): the best core OpenBLAS 0.3.21 knows that the flags support,
 * or NULL when `chosen` is as good or is a name this table does not rank
 * (a newer OpenBLAS, another architecture). */
const char *ast_blas_coretype_better(const char *chosen, const char *cpu_flags);

/* Called first thing in main: unless OPENBLAS_CORETYPE is set (the
 * user's choice wins) or this process is already the re-run, runs argv
 * again with the better core type (a debug log line says so); returns
 * only when nothing is to be done or the re-run could not start. */
void ast_blas_coretype_fix(char **argv);

/* One line for a run's records: OpenBLAS's version, the kernels in use
 * and who chose them, e.g. "OpenBLAS 0.3.21, Cooperlake kernels (alphast
 * set OPENBLAS_CORETYPE; OpenBLAS chose Prescott)". Returns buf. */
const char *ast_blas_coretype_describe(char *buf, size_t n);

#endif
