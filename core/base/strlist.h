/* A growable list of owned strings, for directory listings and messages.
 * Internal to the core (not part of the public headers). */
#ifndef ALPHAST_STRLIST_H
#define ALPHAST_STRLIST_H

#include <stddef.h>

typedef struct ast_strlist {
    char **v;
    int n, cap;
} ast_strlist;

void ast_strlist_push(ast_strlist *l, const char *s);
/* Keeps the list sorted and free of duplicates. */
void ast_strlist_insert_sorted(ast_strlist *l, const char *s);
int ast_strlist_find(const ast_strlist *l, const char *s); /* index or -1 */
/* "a, b, c" into buf (truncated to fit); `none` when the list is empty. */
const char *ast_strlist_join(const ast_strlist *l, const char *sep, const char *none, char *buf, size_t n);
void ast_strlist_free(ast_strlist *l);

#endif
