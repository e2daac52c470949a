/* xoshiro256** (Blackman & Vigna), seeded through splitmix64: fast, small
 * state that checkpoints can save, and the same stream on every machine. */
#include <math.h>

#include "engine/engine.h"

static uint64_t splitmix64(uint64_t *x) { return ast_mix64(*x += 0x9e3779b97f4a7c15ull); }

void ast_rng_seed(ast_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
    r->has_spare = 0;
    r->spare = 0.0f;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ast_rng_next(ast_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float ast_rng_uniform01(ast_rng *r) { return (float)(ast_rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float ast_rng_gauss(ast_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    /* u1 in (0, 1] so log(u1) is finite. */
    double u1 = ((double)(ast_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(ast_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    double rad = sqrt(-2.0 * log(u1));
    r->spare = (float)(rad * sin(2.0 * M_PI * u2));
    r->has_spare = 1;
    return (float)(rad * cos(2.0 * M_PI * u2));
}
