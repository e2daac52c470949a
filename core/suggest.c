/* Edit distance and the closest-candidate search behind "did you mean". */
#include <stdlib.h>
#include <string.h>

#include "alphast/core.h"
#include "suggest.h"

size_t ast_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t *row = ast_xmalloc((lb + 1) * sizeof *row);
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[lb];
    free(row);
    return d;
}

void ast_suggest_init(ast_suggest *s, const char *word) { *s = (ast_suggest){.word = word, .dist = (size_t)-1}; }

void ast_suggest_add(ast_suggest *s, const char *candidate)
{
    size_t d = ast_edit_distance(s->word, candidate);
    if (d < s->dist) {
        s->dist = d;
        s->best = candidate;
    }
}

const char *ast_suggest_best(const ast_suggest *s)
{
    /* Two edits catch a transposition or a dropped letter in short keys;
     * a third of the length scales that to long ones without suggesting
     * unrelated words. */
    size_t limit = strlen(s->word) / 3;
    if (limit < 2) limit = 2;
    return s->best && s->dist <= limit ? s->best : NULL;
}
