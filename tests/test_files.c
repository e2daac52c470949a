/* Reading back what a test's command wrote (tests/test_files.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_files.h"

char *test_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, m);
    fclose(m);
    fclose(f);
    return text;
}

char *test_slurp(const char *path)
{
    char *text = test_read_file(path);
    cr_assert_not_null(text, "%s: cannot read it (was it written?)", path);
    return text;
}
