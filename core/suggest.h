/* "Did you mean ...?" for misspelt keys and names: keeps the closest
 * candidate by edit distance. Internal to the core. */
#ifndef ALPHAST_SUGGEST_H
#define ALPHAST_SUGGEST_H

#include <stddef.h>

/* Levenshtein distance (insertions, deletions, substitutions). */
size_t ast_edit_distance(const char *a, const char *b);

typedef struct ast_suggest {
    const char *word;
    const char *best;
    size_t dist;
} ast_suggest;

void ast_suggest_init(ast_suggest *s, const char *word);
void ast_suggest_add(ast_suggest *s, const char *candidate);
/* The closest candidate if it is plausibly a typo of word, else NULL. */
const char *ast_suggest_best(const ast_suggest *s);

#endif
