/* Labels: integer codes with names, as slices and cell types are kept,
 * from strings or from an obs column. Internal to core/data. */
#ifndef ALPHAST_DATA_LABELS_H
#define ALPHAST_DATA_LABELS_H

#include "data/data.h"

/* Codes [n] numbering the strings in order of first appearance, the
 * distinct strings (copies) in *names. NULL strings are missing (-1). */
int *ast_labels_of_strings(char *const *s, int64_t n, char ***names, int *n_names);
/* Codes [n] of an obs column with their names: a category column's codes
 * and categories; a number column's distinct values in increasing order
 * ("%g"), NaN missing. Missing values are -1. */
int *ast_labels_of_column(const ast_obs_column *c, int64_t n, char ***names, int *n_names);
/* "%.15g" of a number, in a fresh string. */
char *ast_number_label(double v);

#endif
