/* expf and erff for the hot elementwise loops (GELU, softmax, attention).
 *
 * libm's versions are calls with branches, so a loop over them runs one
 * element at a time; these are branch-free polynomials the compiler turns
 * into SIMD code, with the same accuracy as glibc's in float32 (tested in
 * tests/test_fastmath.c against double-precision libm: exp within 2 ulp,
 * erf within 1e-7 absolute). Plain multiply-adds, not fmaf: fmaf is a slow
 * call where the CPU has no FMA, and without it results are the same on
 * every x86-64. Internal to alphast and its in-tree plugins. */
#ifndef ALPHAST_FASTMATH_H
#define ALPHAST_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp(x) by x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r
 * (Cephes expf) and 2^n built in the exponent bits. Below -87.3 the result
 * is 0 and above 88.7 it is +inf, as libm's; NaN passes through. */
static inline float ast_expf(float x)
{
    float xc = x > 88.72283f ? 88.72283f : x;
    xc = xc < -87.33654f ? -87.33654f : xc;
    xc = x != x ? 0.0f : xc; /* NaN: converting it to int below would be undefined */
    /* round to nearest by the 1.5 * 2^23 trick: rintf is a call without SSE4.1 */
    float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;
    float r = n * -0.693359375f + xc;
    r = n * 2.12194440e-4f + r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n in two halves, so n = 128 (x near the overflow edge) still fits. */
    int32_t h = (int32_t)n / 2;
    uint32_t b1 = (uint32_t)(h + 127) << 23, b2 = (uint32_t)((int32_t)n - h + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    float y = p * s1 * s2;
    y = x > 88.72283f ? INFINITY : y;
    y = x < -87.33654f ? 0.0f : y;
    return x != x ? x : y;
}

/* erf(x): an odd polynomial below |x| = 0.9277 and 1 - exp(-poly) above it
 * (N. Juffa's float erf coefficients); both halves are evaluated and
 * one is selected, so the loop stays branch-free. */
static inline float ast_erff(float a)
{
    float t = fabsf(a), s = a * a;
    float r = -1.72853470e-5f * t + 3.83197126e-4f;
    float u = -3.88396438e-3f * t + 2.42546219e-2f;
    r = r * s + u;
    r = r * t - 1.06777877e-1f;
    r = r * t - 6.34846687e-1f;
    r = r * t - 1.28717512e-1f;
    r = r * t - t;
    float tail = copysignf(1.0f - ast_expf(r), a);
    float q = -5.96761703e-4f;
    q = q * s + 4.99119423e-3f;
    q = q * s - 2.67681349e-2f;
    q = q * s + 1.12819925e-1f;
    q = q * s - 3.76125336e-1f;
    q = q * s + 1.28379166e-1f;
    float core = q * a + a;
    return t > 0.927734375f ? tail : core;
}

#endif
