/* base/csv.h: CSV fields as RFC 4180 has them, for the small result files
 * people open in a spreadsheet (placement.csv, the report's figure data):
 * names there (cells, cell types, configs) may hold commas or quotes. */
#ifndef ALPHAST_CSV_H
#define ALPHAST_CSV_H

#include <stdio.h>

/* Writes s as one field: quoted, with " doubled, when it holds a comma, a
 * quote or a line break; as it is otherwise. */
void ast_csv_field(FILE *f, const char *s);

/* Splits one line (its line break, if any, dropped) into at most max
 * fields, in place: the fields point into line, unquoted. Returns how many
 * fields the line has (which may exceed max: the rest are not stored). */
int ast_csv_split(char *line, char **fields, int max);

#endif
