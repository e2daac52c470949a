/* base/text.h: reading words people type: YAML 1.1 scalars (shared by the
 * config and the plugin options) and did-you-mean suggestions. */
#ifndef ALPHAST_TEXT_H
#define ALPHAST_TEXT_H

#include <stdint.h>

/* YAML 1.1 scalars by their text: 0 if the text is such a value. */
int ast_yaml_int(const char *text, int64_t *out);   /* [-+]?[0-9]+ */
int ast_yaml_float(const char *text, double *out);  /* 1, -0.5, 1e-4, .5E+3 */
int ast_yaml_bool(const char *text, int *out);      /* true/false yes/no on/off, any case */

/* The candidate closest to `word` by edit distance (case-insensitive), or
 * NULL if none is close enough to be a plausible typo. */
const char *ast_did_you_mean(const char *word, const char *const *candidates, int n);

#endif
