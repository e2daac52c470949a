/* "Did you mean ...?" for unknown names: the closest candidate by edit
 * distance (Levenshtein with swaps), ignoring case (PositionMLP_setting
 * typed in lower case is still the same key). */
#include <ctype.h>
#include <string.h>

#include "base/text.h"

enum { MAX_NAME = 64 };

static int same(char a, char b) { return tolower((unsigned char)a) == tolower((unsigned char)b); }

static int min3(int a, int b, int c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

/* Edits are insertions, deletions, substitutions and swaps of two
 * neighbours (jiont -> joint is one slip of the fingers, not two). */
static int distance(const char *a, const char *b)
{
    int na = (int)strlen(a), nb = (int)strlen(b);
    int d[MAX_NAME + 1][MAX_NAME + 1];
    if (na > MAX_NAME || nb > MAX_NAME) return MAX_NAME;
    for (int i = 0; i <= na; i++) d[i][0] = i;
    for (int j = 0; j <= nb; j++) d[0][j] = j;
    for (int i = 1; i <= na; i++)
        for (int j = 1; j <= nb; j++) {
            d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + !same(a[i - 1], b[j - 1]));
            int swapped = i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]);
            if (swapped && d[i - 2][j - 2] + 1 < d[i][j]) d[i][j] = d[i - 2][j - 2] + 1;
        }
    return d[na][nb];
}

const char *ast_did_you_mean(const char *word, const char *const *candidates, int n)
{
    /* One edit per three letters still reads as a typo; more is another word. */
    int limit = (int)strlen(word) / 3 > 1 ? (int)strlen(word) / 3 : 1;
    const char *best = NULL;
    int best_d = limit + 1;
    for (int i = 0; i < n; i++) {
        int d = distance(word, candidates[i]);
        if (d < best_d) best = candidates[i], best_d = d;
    }
    return best;
}
