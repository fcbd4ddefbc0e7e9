/* SPDX-License-Identifier: Apache-2.0 */
/* Counter-based random numbers for per-sample augmentation.
 *
 * Every value is a pure function of (seed, epoch, record id, draw index): no state, no
 * sequence, so a sample's crop and flip never depend on which thread ran it, in which
 * order, or on what other samples drew. The mixing is splitmix64's finaliser applied to
 * each key word in turn (each step a bijection of 64 bits followed by avalanche), which is
 * plenty for choosing crop boxes; it is not for cryptography. */
#ifndef STOKER_COMMON_RNG_H
#define STOKER_COMMON_RNG_H

#include <stdint.h>

static inline uint64_t stoker__mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 64 random bits for draw `draw` of record `id` in `epoch` under `seed`. */
static inline uint64_t stoker__rng_u64(uint64_t seed, int64_t epoch, int64_t id, uint64_t draw)
{
    uint64_t h = stoker__mix64(seed + 0x9E3779B97F4A7C15ull);
    h = stoker__mix64(h ^ ((uint64_t)epoch + 0xD1B54A32D192ED03ull));
    h = stoker__mix64(h ^ ((uint64_t)id + 0x8CB92BA72F3D8DD7ull));
    return stoker__mix64(h ^ (draw * 0xA24BAED4963EE407ull + 0x3C6EF372FE94F82Bull));
}

/* A uniform double in [0, 1) with 53 random bits. */
static inline double stoker__rng_unit(uint64_t seed, int64_t epoch, int64_t id, uint64_t draw)
{
    return (double)(stoker__rng_u64(seed, epoch, id, draw) >> 11) * 0x1.0p-53;
}

#endif
