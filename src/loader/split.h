/* SPDX-License-Identifier: Apache-2.0 */
/* The split of a batch's JPEG records between the CPU workers and the GPU decoder.
 *
 * The objective is the consumer's step rate, not the loader's own throughput: every image
 * the GPU decodes costs the consumer's kernels some time (docs/GPU.md), so the CPU decodes
 * first and the GPU takes only the overflow. The share (of the records the GPU could take:
 * the eligible ones) starts at 0 and is decided once a period of deliveries
 * (stoker__split_consumed), by the first rule that holds:
 *
 *   rule (the period's averages)                                     the share   reason
 *   waited > wait_high, gpu_queued >= gpu_behind                     down        GPU_BEHIND
 *   waited > wait_high, busy < busy_high                             holds       NOT_CPU
 *   waited > wait_high                                               up          MORE
 *   low > 0, ahead < low and <= the period before's, busy >=
 *     busy_high, gpu_queued < gpu_behind (the ring runs dry)         up          DRY
 *   waited < wait_low, share > 0, busy < busy_slack, and ahead >=
 *     slack (slack > 0) or gpu_queued >= gpu_behind                  down        SLACK
 *   waited < wait_low, ahead >= `ahead`                              down        LESS
 *   waited < wait_low, ahead >= low, gpu_queued < gpu_behind, and
 *     the rates ask for less than share - step_down                  down        TRIM
 *   anything else (a dead band: a steady job settles and stays)      holds       HOLD
 *
 * `waited` is the share of the period's time the consumer waited. A rise goes to what the
 * period's rates ask for (the loader's periods carry them): the consumer's own rate (its
 * records over its time less its waits) less what the workers make (their records over
 * their busy share, counted at no less than busy_high), both smoothed (`smoothing`), as a
 * part of the eligible records, plus `margin`; by step_min at least and `jump` at most.
 * Without rates, MORE rises by gain x waited / the eligible part, at least step_min and at
 * most step_max, twice the last rise's most when the last period rose too (up to 4 x
 * step_max), and DRY by step_min. For a consumer whose own rate is more than twice what it
 * is given (smoothed), rises stop at the `ceiling` (where both sides kept pace when the GPU
 * last fell behind) unless by step_min. GPU_BEHIND falls to where both sides keep pace by
 * the period's rates, by step_down at least and `drop` at most (by step_down without them);
 * the other falls are by step_down; a share that falls below the floor goes to 0 (TRIM is
 * taken only with the rates). A rise ends at 1 - floor (CAPPED), so the CPU keeps some
 * records while both work.
 *
 * A consumer that never waits on the CPU alone keeps a share of 0. Every batch's measures
 * (stoker__split_update) keep the smoothed rates and `cap`, the share at which both sides
 * would finish a batch together (r_gpu / (r_cpu + r_gpu) over the eligible part): a figure
 * for the description, not a bound. A GPU batch that fails (its records go back to the CPU)
 * leaves the share as it was; `max_failures` failed batches in a row send everything to the
 * CPU for `retry_after` batches, after which one batch at the floor share tries the GPU
 * again: a success resumes the split, a failure doubles the wait. Why each rule and default
 * is there: docs/BENCHMARKS.md, "The split's rules".
 *
 * Plain data, no allocation, no locks of its own: the GPU decode stage calls it under its
 * mutex (whichever worker publishes a batch, and the consumer thread once a period). */
#ifndef STOKER_LOADER_SPLIT_H
#define STOKER_LOADER_SPLIT_H

#include "common/common.h"

typedef struct stoker__split_config {
    double floor;         /* least share of eligible records the CPU keeps (0: 0.05); also the
                             share of a retry after a fallback */
    double smoothing;     /* weight of the newest batch in the throughputs (0: 0.4) */
    int32_t max_failures; /* failed GPU batches in a row before the CPU takes all (0: 3) */
    int32_t retry_after;  /* batches on the CPU alone before trying the GPU again (0: 64) */
    double wait_high;     /* the consumer's waited share above which the GPU takes more
                             (0: 0.02) */
    double wait_low;      /* ... below which, with batches ahead, it takes less (0: 0.005) */
    double ahead;         /* batches ready at the consumer's calls, on average, that count as
                             ahead of it (0: 1.5); the GPU stage sets 3/4 of the ring, so that
                             only producers held back by a full ring take the share down */
    double busy_high;     /* the workers' busy share at which the CPU is the limit (0: 0.5) */
    double gain;          /* of the waited share, added to the share (0: 0.6) */
    double step_min;      /* least rise (0: 0.02) */
    double step_max;      /* greatest first rise (0: 0.05); rises in a row may double it,
                             twice */
    double step_down;     /* fall per period with batches ahead (0: 0.02) */
    double low;           /* batches ready at the consumer's calls, on average, below which
                             (and no more than the period before) the ring runs dry: with
                             the workers busy the GPU takes step_min more (0: never) */
    double gpu_behind;    /* batches waiting for the GPU decode stage at the consumer's calls,
                             on average, at which the GPU is the slower side (0: 1) */
    double slack;         /* batches ready at the consumer's calls, on average, at which idle
                             workers take records back from the GPU (0: never) */
    double busy_slack;    /* the workers' busy share under which they are idle enough for
                             that (0: 0.85) */
    double margin;        /* added to the share the period's rates ask for (0: 0.04) */
    double jump;          /* most a period's rates raise the share at once (0: 0.3) */
    double drop;          /* ... and lower it (0: 0.1) */
} stoker__split_config;

/* What one batch measured. Busy time is the wall time a side needed for its records of the
 * batch (from its first record started to its last finished), so that records / time is its
 * throughput. A side with no records or no time tells nothing about its speed. */
typedef struct stoker__split_batch {
    uint64_t cpu_ns, gpu_ns;
    int64_t cpu_records, gpu_records;
    int64_t records;  /* in the batch */
    int64_t eligible; /* of them, those the GPU could take */
    bool gpu_failed;  /* the GPU side failed; its records were decoded by the CPU */
} stoker__split_batch;

/* What the consumer saw over a period of deliveries. */
typedef struct stoker__split_period {
    double seconds;    /* from the delivery before the period's first to its last */
    double waited;     /* of it, the consumer's time waiting for batches */
    double ahead;      /* batches ready (not yet taken) at its calls, on average */
    double busy;       /* the CPU workers' busy share over the period (0..1) */
    double gpu_queued; /* batches waiting for the GPU decode stage (none of its runs free for
                          them) at the consumer's calls, on average */
    /* The period's rates (0: not measured, and the rules move the share by steps alone):
     * records delivered to the consumer, and records each side decoded meanwhile. */
    double records, cpu_records, gpu_records;
} stoker__split_period;

/* Why the share is what it is (the last decision). */
enum {
    STOKER__SPLIT_START = 0,  /* nothing seen yet: the CPU alone */
    STOKER__SPLIT_MORE,       /* the consumer waited for a busy CPU: the GPU took more */
    STOKER__SPLIT_CAPPED,     /* ... and the GPU takes its most, 1 - floor */
    STOKER__SPLIT_NOT_CPU,    /* the consumer waited, yet the workers were not the limit */
    STOKER__SPLIT_HOLD,       /* batches come as the consumer needs them */
    STOKER__SPLIT_LESS,       /* batches ahead of the consumer: the GPU took less */
    STOKER__SPLIT_FALLBACK,   /* GPU failures: the CPU alone for a while */
    STOKER__SPLIT_GPU_BEHIND, /* the consumer waited with batches queued for the GPU: less */
    STOKER__SPLIT_DRY,        /* the ring runs dry with the workers busy: the GPU took more */
    STOKER__SPLIT_SLACK,      /* batches ahead, or held by the GPU, with idle workers: less */
    STOKER__SPLIT_TRIM        /* batches come in time, and the rates ask for less: less */
};

typedef struct stoker__split {
    stoker__split_config cfg;  /* defaults resolved */
    bool gpu;                  /* a GPU side exists */
    double share;              /* of the eligible records, for the next batch */
    double cap;                /* the share at which both sides finish together (a figure) */
    double cpu_rate, gpu_rate; /* records per second, smoothed; 0 until measured */
    double eligible_part;      /* eligible / records, smoothed; 0 until measured */
    int32_t failures;          /* failed GPU batches in a row */
    bool retrying;             /* this batch tries the GPU again after a fallback */
    int64_t fallback_left;     /* batches left on the CPU alone */
    int64_t wait;              /* the next fallback's length */
    int32_t reason;            /* STOKER__SPLIT_* of the last decision */
    stoker__split_period last; /* the period it was made on */
    int32_t rises;             /* rises in a row for waits (each may be twice the last's) */
    double cpu_full, consumer; /* the rates, records per second, smoothed over periods */
    double ceiling;            /* where both sides kept pace by the rates when the GPU last
                                  fell behind: the rises of a consumer that mostly waited stop
                                  there, and above it go by step_min (0: not fallen behind) */
    double delivered;          /* records per second the consumer was given, smoothed */
} stoker__split;

/* A controller; cfg may be NULL (every default). gpu false: the share is always 0. */
void stoker__split_init(stoker__split *s, const stoker__split_config *cfg, bool gpu);

/* Takes one batch's measurements (throughputs, the eligible part, failures); returns the
 * share of eligible records (0..1) that the GPU takes in the next batch. */
double stoker__split_update(stoker__split *s, const stoker__split_batch *b);

/* Takes a period of the consumer's deliveries and decides; returns the share. */
double stoker__split_consumed(stoker__split *s, const stoker__split_period *p);

/* The share for the next batch (what the last update or decision returned). */
double stoker__split_share(const stoker__split *s);

/* The share at which both sides would finish a batch together, by their measured rates (a
 * figure: it does not bound the share). */
double stoker__split_cap(const stoker__split *s);

/* The smoothed eligible / records (1 until measured). */
double stoker__split_eligible_part(const stoker__split *s);

/* Whether the CPU has taken everything because the GPU failed (until the next retry). */
bool stoker__split_fallen_back(const stoker__split *s);

/* Says in a line why the share is what it is, with the figures it was decided on. */
void stoker__split_describe(const stoker__split *s, char *buf, size_t cap);

/* How many of `eligible` records go to the GPU at `share`: the nearest whole number, at least
 * one when the share is above 0 and at most eligible - 1 when it is below 1 (so that a small
 * batch keeps both sides measured). */
int32_t stoker__split_gpu_count(double share, int32_t eligible);

/* Whether eligible record `index` (0 .. eligible - 1, in batch order) goes to the GPU: the
 * gpu_count records picked are spread evenly over the batch (any run of n eligible records
 * holds n * count / eligible of them, rounded either way), so that every piece of the batch
 * gives the CPU workers the same mix. A pure function of its arguments. */
bool stoker__split_to_gpu(double share, int32_t eligible, int32_t index);

#endif
