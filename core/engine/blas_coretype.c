/* See blas_coretype.h. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/base.h"
#include "engine/blas_coretype.h"

/* OpenBLAS's x86-64 core names by the instruction set their kernels use:
 * 1 SSE4.2, 2 AVX, 3 AVX2 + FMA, 4 AVX-512, 5 AVX-512 BF16, 6 AMX. */
static const struct {
    const char *name;
    int level;
} cores[] = {
    {"prescott", 0},   {"core2", 0},      {"penryn", 0},    {"dunnington", 0}, {"atom", 0},
    {"athlon", 0},     {"opteron", 0},    {"opteron_sse3", 0}, {"barcelona", 0}, {"bobcat", 0},
    {"nano", 0},       {"nehalem", 1},    {"sandybridge", 2}, {"bulldozer", 2},  {"haswell", 3},
    {"zen", 3},        {"piledriver", 3}, {"steamroller", 3}, {"excavator", 3},  {"skylakex", 4},
    {"cooperlake", 5}, {"sapphirerapids", 6},
};

/* What each level needs in /proc/cpuinfo's flags, and the core asked for.
 * The top is Cooperlake: 0.3.21 has no SapphireRapids kernels, and AMX
 * CPUs have AVX-512 BF16. */
static const struct {
    const char *flags[4];
    const char *core;
    int level;
} wants[] = {
    {{"avx512_bf16", "avx512f", "avx512bw", "avx512vl"}, "Cooperlake", 5},
    {{"avx512f", "avx512bw", "avx512dq", "avx512vl"}, "SkylakeX", 4},
    {{"avx2", "fma", NULL}, "Haswell", 3},
    {{"avx", NULL}, "Sandybridge", 2},
    {{"sse4_2", NULL}, "Nehalem", 1},
};

static int level_of(const char *core)
{
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (!strcasecmp(core, cores[i].name)) return cores[i].level;
    return -1;
}

static int has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)); p += n)
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t') && (p[n] == 0 || p[n] == ' ' || p[n] == '\n')) return 1;
    return 0;
}

const char *ast_blas_coretype_better(const char *chosen, const char *cpu_flags)
{
    int have = level_of(chosen);
    if (have < 0) return NULL;
    for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++) {
        int all = 1;
        for (int f = 0; f < 4 && wants[i].flags[f]; f++) all &= has_flag(cpu_flags, wants[i].flags[f]);
        if (all) return wants[i].level > have ? wants[i].core : NULL;
    }
    return NULL;
}

/* The "flags" line of /proc/cpuinfo into buf; 0 if there is none. */
static int read_cpu_flags(char *buf, size_t n)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    int found = 0;
    while (f && !found && fgets(buf, (int)n, f)) found = !strncmp(buf, "flags", 5);
    if (f) fclose(f);
    return found;
}

/* Set in the re-run's environment to the core OpenBLAS chose first, so
 * the re-run neither loops nor forgets why its kernels are what they are. */
#define REEXEC_MARK "ALPHAST_BLAS_CORETYPE_SET"

void ast_blas_coretype_fix(char **argv)
{
    static char flags[16384];
    if (getenv("OPENBLAS_CORETYPE") || getenv(REEXEC_MARK) || !read_cpu_flags(flags, sizeof flags)) return;
    const char *chosen = openblas_get_corename();
    const char *better = chosen ? ast_blas_coretype_better(chosen, flags) : NULL;
    if (!better) {
        ast_log(AST_LOG_DEBUG, "%s chose its %s kernels, which suit this CPU", OPENBLAS_VERSION + 1,
                chosen ? chosen : "unnamed");
        return;
    }
    /* Debug, not info: this runs before every command, --help and
     * --version included, and the choice is recorded in each run's
     * summary.json (ast_blas_coretype_describe) where it matters. */
    ast_log(AST_LOG_DEBUG, "%s chose its %s kernels, but this CPU has the features of %s: running again with "
                           "OPENBLAS_CORETYPE=%s (set OPENBLAS_CORETYPE yourself to choose)",
            OPENBLAS_VERSION + 1, chosen, better, better);
    setenv("OPENBLAS_CORETYPE", better, 1);
    setenv(REEXEC_MARK, chosen, 1);
    execv("/proc/self/exe", argv);
    ast_log(AST_LOG_WARN, "could not run again with OPENBLAS_CORETYPE=%s; going on with %s kernels", better, chosen);
}

const char *ast_blas_coretype_describe(char *buf, size_t n)
{
    /* OPENBLAS_VERSION is " OpenBLAS 0.3.21 ", spaces included */
    const char *first = getenv(REEXEC_MARK);
    const char *kernels = openblas_get_corename();
    if (first)
        snprintf(buf, n, "%.*s, %s kernels (alphast set OPENBLAS_CORETYPE; OpenBLAS chose %s)",
                 (int)strlen(OPENBLAS_VERSION) - 2, OPENBLAS_VERSION + 1, kernels, first);
    else
        snprintf(buf, n, "%.*s, %s kernels%s", (int)strlen(OPENBLAS_VERSION) - 2, OPENBLAS_VERSION + 1, kernels,
                 getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE set by the user)" : "");
    return buf;
}
