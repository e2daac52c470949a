/* tests/test_files.h: reading back what a test's command wrote. */
#ifndef ALPHAST_TEST_FILES_H
#define ALPHAST_TEST_FILES_H

/* The whole file as a NUL-terminated string the caller frees, or NULL when
 * it cannot be opened (for tests that check a file is absent). */
char *test_read_file(const char *path);
/* The same, failing the test when the file cannot be read. */
char *test_slurp(const char *path);

#endif
