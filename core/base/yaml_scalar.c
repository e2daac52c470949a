/* YAML 1.1 scalars read by their text, as the schema's types want them
 * (not as YAML's own resolver would: PyYAML reads 1e-4 as a string). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"

static const char *skip_digits(const char *s)
{
    while (isdigit((unsigned char)*s)) s++;
    return s;
}

int ast_yaml_int(const char *text, int64_t *out)
{
    const char *s = text + (*text == '-' || *text == '+');
    if (!isdigit((unsigned char)*s) || *skip_digits(s)) return -1;
    errno = 0;
    long long v = strtoll(text, NULL, 10);
    if (errno == ERANGE) return -1;
    *out = v;
    return 0;
}

/* [-+]? (digits [. digits?] | . digits) ([eE] [-+]? digits)? : strtod alone
 * would also take "inf", "nan" and hex floats. */
int ast_yaml_float(const char *text, double *out)
{
    const char *s = text + (*text == '-' || *text == '+');
    const char *int_end = skip_digits(s), *frac_end = int_end;
    if (*int_end == '.') frac_end = skip_digits(int_end + 1);
    if (int_end == s && frac_end <= int_end + 1) return -1; /* no digits at all */
    s = frac_end;
    if (*s == 'e' || *s == 'E') {
        s += 1 + (s[1] == '-' || s[1] == '+');
        if (!isdigit((unsigned char)*s)) return -1;
        s = skip_digits(s);
    }
    if (*s) return -1;
    double v = strtod(text, NULL);
    if (!isfinite(v)) return -1;
    *out = v;
    return 0;
}

int ast_yaml_bool(const char *text, int *out)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(text, yes[i])) return *out = 1, 0;
        if (!strcasecmp(text, no[i])) return *out = 0, 0;
    }
    return -1;
}
