/* The OpenBLAS core-type decision (engine/blas_coretype.h) on feature
 * flags recorded from /proc/cpuinfo of real machines, and the re-run of
 * alphast-run it drives. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/blas_coretype.h"

/* Xeon 5th gen (family 6 model 207, Emerald Rapids): AMX and AVX-512 BF16;
 * OpenBLAS 0.3.21 does not know the model and says Prescott. */
static const char emerald_rapids[] =
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall "
    "nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 "
    "fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm "
    "abm 3dnowprefetch fsgsbase bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma "
    "clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 wbnoinvd "
    "avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq "
    "rdpid cldemote movdiri movdir64b md_clear serialize tsxldtrk amx_bf16 avx512_fp16 amx_tile amx_int8 arch_capabilities";
/* Skylake-SP: AVX-512 without BF16. */
static const char skylake_sp[] =
    "fpu vme de pse tsc msr pae mce cx8 apic sep sse sse2 ssse3 fma cx16 sse4_1 sse4_2 popcnt aes xsave avx f16c "
    "avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl xsaveopt";
/* Zen 3: AVX2, no AVX-512. */
static const char zen3[] = "fpu sse sse2 ssse3 fma cx16 sse4_1 sse4_2 popcnt aes xsave avx f16c avx2 bmi1 bmi2 sha_ni vaes";
/* A guest whose hypervisor hides AVX: SSE4.2 at most. */
static const char no_avx[] = "fpu sse sse2 ssse3 cx16 sse4_1 sse4_2 popcnt";

Test(blas_coretype, a_cpu_newer_than_openblas_gets_the_kernels_its_features_allow)
{
    cr_assert_str_eq(ast_blas_coretype_better("Prescott", emerald_rapids), "Cooperlake");
    cr_assert_str_eq(ast_blas_coretype_better("SkylakeX", emerald_rapids), "Cooperlake");
    cr_assert_str_eq(ast_blas_coretype_better("Haswell", skylake_sp), "SkylakeX");
    cr_assert_str_eq(ast_blas_coretype_better("Prescott", zen3), "Haswell");
    cr_assert_str_eq(ast_blas_coretype_better("Core2", no_avx), "Nehalem");
}

Test(blas_coretype, kernels_as_good_as_the_cpu_are_kept)
{
    cr_assert_null(ast_blas_coretype_better("Cooperlake", emerald_rapids));
    cr_assert_null(ast_blas_coretype_better("SapphireRapids", emerald_rapids), "a newer OpenBLAS's best");
    cr_assert_null(ast_blas_coretype_better("SkylakeX", skylake_sp));
    cr_assert_null(ast_blas_coretype_better("Zen", zen3), "Zen kernels are AVX2 kernels");
    cr_assert_null(ast_blas_coretype_better("Nehalem", no_avx));
}

Test(blas_coretype, unknown_names_and_partial_flags_change_nothing)
{
    cr_assert_null(ast_blas_coretype_better("NeoverseN1", emerald_rapids), "another architecture, or an unknown name");
    /* a flag must match whole: avx512f alone is not avx512_bf16 */
    cr_assert_str_eq(ast_blas_coretype_better("Prescott", "sse4_2 avx avx2 fma avx512f avx512bw avx512dq avx512vl"),
                     "SkylakeX");
    cr_assert_str_eq(ast_blas_coretype_better("Prescott", "avx2x avx fma"), "Sandybridge", "avx2x is not avx2");
}

/* Standard error of a command line run through sh. */
static void stderr_of(const char *cmd, char *buf, size_t n)
{
    char line[8192];
    snprintf(line, sizeof line, "%s 2>&1 >/dev/null", cmd);
    FILE *p = popen(line, "r");
    size_t got = fread(buf, 1, n - 1, p);
    buf[got] = 0;
    cr_assert_eq(pclose(p), 0, "%s: %s", cmd, buf);
}

/* The re-run, seen from outside: with a user's OPENBLAS_CORETYPE of older
 * kernels alphast-run keeps it (no re-run line, even at debug level). */
Test(blas_coretype, a_users_coretype_wins)
{
    char buf[4096];
    stderr_of("OPENBLAS_CORETYPE=Prescott ALPHAST_LOG=debug " ALPHAST_BUILD_DIR "/alphast-run --version", buf,
              sizeof buf);
    cr_assert_null(strstr(buf, "running again"), "%s", buf);
}

/* With OPENBLAS_CORETYPE unset, on a CPU newer than OpenBLAS (where the
 * re-run happens) as on any other, --help and --version print nothing on
 * standard error at the default log level: the CLI tests compare it. */
Test(blas_coretype, the_rerun_is_silent_by_default)
{
    static const char *const cmds[] = {
        "env -u OPENBLAS_CORETYPE -u ALPHAST_LOG " ALPHAST_BUILD_DIR "/alphast-run --version",
        "env -u OPENBLAS_CORETYPE -u ALPHAST_LOG " ALPHAST_BUILD_DIR "/alphast-run --help",
        "env -u OPENBLAS_CORETYPE -u ALPHAST_LOG " ALPHAST_BUILD_DIR "/alphast-run train --help",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char buf[4096];
        stderr_of(cmds[i], buf, sizeof buf);
        cr_assert_str_empty(buf, "%s", cmds[i]);
    }
}

Test(blas_coretype, a_run_records_the_kernels_and_who_chose_them)
{
    char buf[256];
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    ast_blas_coretype_describe(buf, sizeof buf);
    cr_assert(strstr(buf, "OpenBLAS ") == buf && strstr(buf, " kernels (OPENBLAS_CORETYPE set by the user)"), "%s",
              buf);
    unsetenv("OPENBLAS_CORETYPE");
    ast_blas_coretype_describe(buf, sizeof buf);
    cr_assert_null(strstr(buf, "("), "%s", buf);
}
