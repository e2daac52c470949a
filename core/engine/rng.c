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
