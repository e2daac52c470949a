/* A growable list of owned strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "strlist.h"

static void insert_at(ast_strlist *l, int at, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = ast_xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    memmove(l->v + at + 1, l->v + at, (size_t)(l->n - at) * sizeof *l->v);
    l->v[at] = ast_xstrdup(s);
    l->n++;
}

void ast_strlist_push(ast_strlist *l, const char *s) { insert_at(l, l->n, s); }

void ast_strlist_insert_sorted(ast_strlist *l, const char *s)
{
    int at = 0;
    while (at < l->n && strcmp(l->v[at], s) < 0) at++;
    if (at < l->n && !strcmp(l->v[at], s)) return;
    insert_at(l, at, s);
}

int ast_strlist_find(const ast_strlist *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s)) return i;
    return -1;
}

const char *ast_strlist_join(const ast_strlist *l, const char *sep, const char *none, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    if (!l->n) snprintf(buf, n, "%s", none);
    for (int i = 0; i < l->n && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? sep : "", l->v[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

void ast_strlist_free(ast_strlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    *l = (ast_strlist){0};
}
