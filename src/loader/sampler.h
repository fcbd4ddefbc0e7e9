/* SPDX-License-Identifier: Apache-2.0 */
/* The sampler: which records go into which batch, on which rank, in which epoch.
 *
 * Pure functions of (data set size, batch size, rank, world size, shuffle, drop_last, seed,
 * epoch): no allocation, no state beyond a few integers, so the resume state of a loader is
 * just those plus a position, and any thread can compute any batch on its own.
 *
 * The rule (docs/SEMANTICS.md, "Order, ranks and epochs"), with N records, per-rank batch size B,
 * world size W, rank r, G = B * W records per global batch, and P the epoch's permutation of
 * 0..N-1:
 *
 *   drop_last = false:  T  = ceil(N / W) * W        (padded length; Q[i] = P[i mod N], i.e.
 *                                                     padded with the permutation's own first
 *                                                     records, repeated if N < W)
 *                       nb = ceil(T / G)            (batches per rank)
 *                       batch k < nb - 1 : Q[k*G + r*B      .. k*G + (r+1)*B)
 *                       last batch       : L = (T - (nb-1)*G) / W records (T and G are
 *                                          multiples of W, so L is whole and the same on
 *                                          every rank): Q[(nb-1)*G + r*L .. + L)
 *                       records per rank = T / W
 *   drop_last = true:   nb = floor(N / G); batch k: P[k*G + r*B .. k*G + (r+1)*B)
 *                       records per rank = nb * B; the remaining N - nb*G are not seen
 *
 * That is DistributedSampler's padding and record count, cut into global batches as
 * docs/SEMANTICS.md states (rank r takes a contiguous slice of each global batch, rather
 * than DistributedSampler's stride-W interleaving).
 *
 * The permutation: a keyed bijection on [0, 2^2h) (a 4-round balanced Feistel network whose
 * round function is a splitmix64 finaliser keyed by (seed, epoch, round)), restricted to
 * [0, N) by cycle-walking (apply again until the value falls below N; 2^2h < 4N, so fewer
 * than 4 steps on average). O(1) memory and O(1) per position, so workers evaluate it
 * directly; no per-epoch table to draw or share. shuffle = false gives the identity.
 *
 * The block order (STOKER_ORDER_BLOCKS) draws P differently, for data whose reads are cheap
 * only in runs (a compressed HDF5 chunk is inflated whole): ids are cut into blocks of K
 * consecutive ids (the last block holds the remaining N mod K when that is not 0); P visits
 * the blocks in a keyed permutation of their numbers, and each block's ids in a permutation
 * keyed by (seed, epoch, block number), so a block's ids take K consecutive positions of P.
 * The partial last block is placed where the block permutation puts it, the positions after
 * it shifted by its size (found in O(1) with the Feistel map's inverse). P is still a
 * permutation of 0..N-1 and a pure function of (seed, epoch, N, K); padding, rank slices and
 * drop_last apply to it unchanged. */
#ifndef STOKER_SAMPLER_H
#define STOKER_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct stoker__sampler {
    uint64_t n;     /* records in the data set */
    uint64_t batch; /* B: records per batch per rank */
    uint32_t rank, world;
    bool shuffle, drop_last;
    uint64_t seed;
    uint64_t block; /* K of the block order; 0: the record order (set by set_blocks) */
    /* derived by init */
    uint64_t nbatches; /* batches per epoch on each rank */
    uint64_t nrecords; /* records per epoch on each rank (padding included) */
    uint64_t last;     /* records in the last batch (B unless short) */
} stoker__sampler;

/* One epoch's permutation: precomputed round keys. */
typedef struct stoker__perm {
    uint64_t n;
    uint64_t keys[4];
    uint32_t half; /* h: bits per Feistel half */
    bool shuffle;
} stoker__perm;

/* One epoch's order P: the record permutation, or the block order (block > 0). */
typedef struct stoker__order {
    stoker__perm outer; /* over records (record order) or over block numbers */
    uint64_t n, block;
    uint64_t inner_seed; /* keys the permutation inside each block */
    uint64_t epoch;
    uint64_t tail;    /* ids in the partial last block; 0 when every block is full */
    uint64_t tail_at; /* the partial block's first position in P */
} stoker__order;

/* Block size of the block order when the data set has no natural one (shards, contiguous
 * HDF5): a few pieces of work, so neighbouring records are read by the same workers. */
#define STOKER__BLOCK_DEFAULT 64u

/* Fills s. Returns false for an invalid combination (batch 0, world 0, rank >= world). */
bool stoker__sampler_init(stoker__sampler *s, uint64_t n, uint64_t batch, uint32_t rank,
                          uint32_t world, bool shuffle, bool drop_last, uint64_t seed);

/* Switches s to the block order with blocks of `block` ids (0: STOKER__BLOCK_DEFAULT). */
void stoker__sampler_set_blocks(stoker__sampler *s, uint64_t block);

/* The block length that decides the order beside (seed, epoch, n): K of a shuffled block
 * order, else 0 (the record order, and any order without shuffle, which is the identity).
 * A saved state records it: a loader whose run differs would continue another permutation. */
uint64_t stoker__sampler_run(const stoker__sampler *s);

/* Records in this rank's batch k (0 <= k < nbatches). */
uint64_t stoker__sampler_batch_count(const stoker__sampler *s, uint64_t k);

/* Writes the record ids of this rank's batch k of `epoch` into ids[0 .. batch_count(k)). */
void stoker__sampler_batch(const stoker__sampler *s, uint64_t epoch, uint64_t k, int64_t *ids);

/* The permutation of `epoch` for n records (identity when !shuffle). */
void stoker__perm_init(stoker__perm *p, uint64_t n, uint64_t seed, uint64_t epoch, bool shuffle);
/* Element i (0 <= i < n) of the permutation. */
uint64_t stoker__perm_at(const stoker__perm *p, uint64_t i);

/* The order of `epoch` for n records: the record permutation when block is 0, else the
 * block order with blocks of `block` ids (identity when !shuffle, either way). */
void stoker__order_init(stoker__order *o, uint64_t n, uint64_t block, uint64_t seed, uint64_t epoch,
                        bool shuffle);
/* Element i (0 <= i < n) of the order. */
uint64_t stoker__order_at(const stoker__order *o, uint64_t i);

/* Per-sample randomness: the starting state of a counter-based generator keyed by
 * (seed, epoch, record id), independent of thread, timing and batch composition. Draw from
 * it with stoker__rng_next. */
uint64_t stoker__sample_rng(uint64_t seed, uint64_t epoch, uint64_t id);
/* splitmix64: advances *state and returns the next 64 random bits. */
uint64_t stoker__rng_next(uint64_t *state);
/* The splitmix64 finaliser (a bijective 64-bit mix). */
uint64_t stoker__mix64(uint64_t x);

#endif
