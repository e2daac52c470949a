/* CSV fields (see base/csv.h). */
#include <string.h>

#include "base/csv.h"

void ast_csv_field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Unquotes the field at *p in place (into `out`, which trails it) up to its
 * comma or the line's end; leaves *p after the comma, or NULL at the end. */
static char *next_field(char **p)
{
    char *in = *p, *out = in, *start = in;
    int quoted = *in == '"';
    for (in += quoted; *in && (quoted || *in != ','); in++) {
        if (quoted && *in == '"') {
            if (in[1] != '"') { /* the closing quote */
                quoted = 0;
                continue;
            }
            in++;
        }
        *out++ = *in;
    }
    *p = *in == ',' ? in + 1 : NULL;
    *out = '\0';
    return start;
}

int ast_csv_split(char *line, char **fields, int max)
{
    line[strcspn(line, "\r\n")] = '\0';
    int n = 0;
    for (char *p = line; p; n++) {
        char *field = next_field(&p);
        if (n < max) fields[n] = field;
    }
    return n;
}
