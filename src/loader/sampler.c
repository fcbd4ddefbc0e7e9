/* SPDX-License-Identifier: Apache-2.0 */
/* Sampler: order, padding and rank slicing (the rule is written out in sampler.h). */
#include "loader/sampler.h"

#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)

uint64_t stoker__mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t stoker__rng_next(uint64_t *state)
{
    *state += GOLDEN;
    return stoker__mix64(*state);
}

uint64_t stoker__sample_rng(uint64_t seed, uint64_t epoch, uint64_t id)
{
    /* Distinct domain constants keep these streams apart from the permutation's keys. */
    uint64_t k = stoker__mix64(seed ^ UINT64_C(0x5354534D504C4531)); /* "STSMPLE1" */
    k = stoker__mix64(k ^ (epoch * GOLDEN));
    return stoker__mix64(k ^ (id + UINT64_C(0x632BE59BD9B4E019)));
}

void stoker__perm_init(stoker__perm *p, uint64_t n, uint64_t seed, uint64_t epoch, bool shuffle)
{
    p->n = n;
    p->shuffle = shuffle && n > 1;
    uint32_t bits = 0;
    while (bits < 64 && (UINT64_C(1) << bits) < n)
        bits++;
    p->half = (bits + 1) / 2;
    if (p->half == 0)
        p->half = 1;
    uint64_t k = stoker__mix64(seed ^ UINT64_C(0x5354505245524D31)); /* "STPRERM1" */
    k = stoker__mix64(k ^ (epoch * GOLDEN));
    for (int i = 0; i < 4; i++)
        p->keys[i] = stoker__mix64(k + (uint64_t)(i + 1) * GOLDEN);
}

/* One pass of the Feistel network on [0, 2^(2h)). */
static uint64_t feistel(const stoker__perm *p, uint64_t x)
{
    const uint32_t h = p->half;
    const uint64_t mask = h >= 32 ? UINT64_C(0xFFFFFFFF) : (UINT64_C(1) << h) - 1;
    uint64_t left = (x >> h) & mask, right = x & mask;
    for (int i = 0; i < 4; i++) {
        const uint64_t f = stoker__mix64(right ^ p->keys[i]) & mask;
        const uint64_t t = right;
        right = left ^ f;
        left = t;
    }
    return (left << h) | right;
}

uint64_t stoker__perm_at(const stoker__perm *p, uint64_t i)
{
    if (!p->shuffle)
        return i;
    /* Cycle-walking: the Feistel map is a bijection of [0, 2^2h) ⊇ [0, n); iterating it from
     * i < n reaches a value < n again before returning to i, and the induced map on [0, n)
     * is a bijection. */
    uint64_t x = feistel(p, i);
    while (x >= p->n)
        x = feistel(p, x);
    return x;
}

/* The Feistel pass run backwards: each round (L, R) -> (R, L ^ f(R)) undone last first. */
static uint64_t feistel_inv(const stoker__perm *p, uint64_t x)
{
    const uint32_t h = p->half;
    const uint64_t mask = h >= 32 ? UINT64_C(0xFFFFFFFF) : (UINT64_C(1) << h) - 1;
    uint64_t left = (x >> h) & mask, right = x & mask;
    for (int i = 3; i >= 0; i--) {
        const uint64_t t = left;
        left = right ^ (stoker__mix64(t ^ p->keys[i]) & mask);
        right = t;
    }
    return (left << h) | right;
}

/* The position of x in the permutation: cycle-walking backwards inverts the cycle-walk. */
static uint64_t perm_inv(const stoker__perm *p, uint64_t x)
{
    if (!p->shuffle)
        return x;
    uint64_t i = feistel_inv(p, x);
    while (i >= p->n)
        i = feistel_inv(p, i);
    return i;
}

void stoker__order_init(stoker__order *o, uint64_t n, uint64_t block, uint64_t seed, uint64_t epoch,
                        bool shuffle)
{
    *o = (stoker__order){.n = n, .block = shuffle ? block : 0, .epoch = epoch};
    if (o->block == 0) {
        /* the record order, or the identity (which every block order without shuffle is) */
        stoker__perm_init(&o->outer, n, seed, epoch, shuffle);
        return;
    }
    const uint64_t nblocks = n / block + (n % block != 0);
    stoker__perm_init(&o->outer, nblocks, seed, epoch, true);
    /* A domain constant keeps the per-block keys apart from the block permutation's. */
    o->inner_seed = stoker__mix64(seed ^ UINT64_C(0x5354424C4F434B31)); /* "STBLOCK1" */
    o->tail = n % block;
    if (o->tail)
        o->tail_at = perm_inv(&o->outer, nblocks - 1) * block;
}

uint64_t stoker__order_at(const stoker__order *o, uint64_t i)
{
    if (o->block == 0)
        return stoker__perm_at(&o->outer, i);
    const uint64_t k = o->block;
    uint64_t blk, off, size = k;
    if (!o->tail || i < o->tail_at) {
        blk = stoker__perm_at(&o->outer, i / k);
        off = i % k;
    } else if (i - o->tail_at < o->tail) {
        blk = o->outer.n - 1;
        off = i - o->tail_at;
        size = o->tail;
    } else {
        /* past the partial block: full blocks resume one slot later, shifted by its size */
        const uint64_t j = i - o->tail + k;
        blk = stoker__perm_at(&o->outer, j / k);
        off = j % k;
    }
    stoker__perm in;
    stoker__perm_init(&in, size, o->inner_seed + (blk + 1) * GOLDEN, o->epoch, true);
    return blk * k + stoker__perm_at(&in, off);
}

bool stoker__sampler_init(stoker__sampler *s, uint64_t n, uint64_t batch, uint32_t rank,
                          uint32_t world, bool shuffle, bool drop_last, uint64_t seed)
{
    if (batch == 0 || world == 0 || rank >= world)
        return false;
    const uint64_t g = batch * world;
    if (g / world != batch)
        return false;
    *s = (stoker__sampler){.n = n,
                           .batch = batch,
                           .rank = rank,
                           .world = world,
                           .shuffle = shuffle,
                           .drop_last = drop_last,
                           .seed = seed};
    if (drop_last) {
        s->nbatches = n / g;
        s->nrecords = s->nbatches * batch;
        s->last = batch;
    } else {
        const uint64_t padded = (n + world - 1) / world * world;
        s->nbatches = (padded + g - 1) / g;
        s->nrecords = padded / world;
        s->last = s->nbatches ? (padded - (s->nbatches - 1) * g) / world : 0;
    }
    return true;
}

void stoker__sampler_set_blocks(stoker__sampler *s, uint64_t block)
{
    s->block = block ? block : STOKER__BLOCK_DEFAULT;
}

uint64_t stoker__sampler_run(const stoker__sampler *s)
{
    return s->shuffle ? s->block : 0; /* unshuffled, every order is the identity */
}

uint64_t stoker__sampler_batch_count(const stoker__sampler *s, uint64_t k)
{
    return k + 1 == s->nbatches ? s->last : s->batch;
}

void stoker__sampler_batch(const stoker__sampler *s, uint64_t epoch, uint64_t k, int64_t *ids)
{
    stoker__order o;
    stoker__order_init(&o, s->n, s->block, s->seed, epoch, s->shuffle);
    const uint64_t count = stoker__sampler_batch_count(s, k);
    const uint64_t start = k * s->batch * s->world + s->rank * count;
    for (uint64_t j = 0; j < count; j++)
        ids[j] = (int64_t)stoker__order_at(&o, (start + j) % s->n);
}
